#!/usr/bin/env bash
# Written in the tenth session, which had no device time (224 s of the budget
# left, too little to start a machine): the next session's first GPU call.
# 1. The GPU tests the tenth session's defaults change (the norm prologue now
#    decided by cost: on for small models, the demo's included; cuBLAS calls
#    of a prefill in workspace slots) and its opt-ins (moe_weighted_sum_add),
#    then the decode kernels with the prefetch prologues on (16 MiB).
# 2. Decode steps with the prologues' budget 0 (the previous kernels: the
#    prologue compiles to nothing) / 16 / 48 MiB, interleaved, and the early
#    trigger; W-tiny with and without the norm prologue; the prefill of 512
#    tokens with workspace slots against the chained form
#    (FG_DEBUG_WORKSPACE_SLOTS=1), twice each.
# The second call (gpu-s10-call2.sh) has ggml-cuda, the other opt-ins, the
# breakdowns and compute-sanitizer.
# Bundle: bash scripts/gpu-bundle.sh --peers; run with carry [".gpu"]:
#   bash scripts/gpu-s10-call1.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
tests() { # label timeout filter [env...]
  local label=$1 limit=$2 filter=$3; shift 3
  timeout "$limit" env "$@" "$T" --gtest_filter="$filter" > "$OUT/tests-$label.txt" 2>&1
  echo "tests ($label) rc $? after $((SECONDS - S)) s"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/tests-$label.txt" | head -20
}
tests defaults 130 'GpuDemo*:GpuSession*:GpuPrefillThenDecode*:*rms_norm_matmul*:*rms_norm_gated*:*moe_weighted_sum*'
tests prefetch16 130 '*Attention*:*gemv*:*Gemv*:*matmul*:GpuDemo*:GpuSession*' FG_DEBUG_PDL_PREFETCH_MB=16
step() { # label env... (the command last)
  local label=$1; shift
  timeout 60 env "$@" > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
  echo "$label $(grep -E 'graph-fused' /tmp/b.txt | head -1)"
}
{
for w in w-dense w-moe-12 w-tiny; do
  for mb in 0 16 48 0 16; do
    [ $(left) -gt 150 ] || break 2
    step "$w mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb fusegraph bench --workload $w --compare fused,graph --steps 50
  done
  step "$w mb=16 early" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_EARLY_TRIGGER=1 fusegraph bench --workload $w --compare fused,graph --steps 50
done
for round in 1 2; do
  [ $(left) -gt 100 ] || break
  step "w-tiny without the norm prologue" fusegraph bench --workload w-tiny --compare fused,graph --steps 50 --disable-fusion rms_norm_matmul
  step "w-tiny default (norm prologue)" fusegraph bench --workload w-tiny --compare fused,graph --steps 50
done
for slots in 1 3 1 3; do
  [ $(left) -gt 30 ] || break
  echo "== w-dense prefill 512, FG_DEBUG_WORKSPACE_SLOTS=$slots"
  FG_DEBUG_WORKSPACE_SLOTS=$slots timeout 60 fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1
  grep -E "prefill_512  " /tmp/p.txt
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
