#!/usr/bin/env bash
# Written in the tenth session, which had no device time left (224 s of the
# budget, too little to start a machine): the next session's first GPU call.
# The programmatic-launch
# prefetch prologues (EmitOptions::pdlPrefetchBytes, FG_DEBUG_PDL_PREFETCH_MB;
# dense GEMVs prefetch their first weight rows, decode attention its splits'
# KV rows into L2 before griddepcontrol.wait) — checked with the prologues on,
# then decode steps timed with budgets 0 (the previous kernels: the prologue
# compiles to nothing) / 4 / 16 / 48 MiB and the early trigger, interleaved in
# one run; ggml-cuda (built in the background meanwhile) beside fusegraph on
# decode and on the prefill of 512 tokens; the prefill's cuBLAS calls in
# workspace slots (parallel q/k/v and gate/up) against the chained form
# (FG_DEBUG_WORKSPACE_SLOTS=1); compute-sanitizer over the ninth session's new
# kernels and the tenth's prologues in the time left.
#   bash scripts/gpu-s10-call1.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
CHECK='*Attention*:*Gemv*:*gemv*:*Matmul*:*matmul*:*Demo*:*Session*:*Workload*:*PrefillThenDecode*:*Prefill*:*moe_weighted_sum*:*rms_norm*'
# The defaults first (the norm prologue is now on for small models, the
# demo's included; cuBLAS calls in workspace slots), then the prologues on.
timeout 150 "$T" --gtest_filter='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:*rms_norm*:*moe_weighted_sum*:*Prefill*' > "$OUT/tests-default.txt" 2>&1
echo "tests (defaults) rc $? after $((SECONDS - S)) s"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/tests-default.txt" | head -20
FG_DEBUG_PDL_PREFETCH_MB=16 timeout 170 "$T" --gtest_filter="$CHECK" > "$OUT/tests-prefetch16.txt" 2>&1
echo "tests (prefetch 16 MiB) rc $? after $((SECONDS - S)) s"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/tests-prefetch16.txt" | head -20
step() { # label env... -- workload
  local label=$1; shift
  timeout 60 env "$@" > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
  echo "$label $(grep -E 'graph-fused' /tmp/b.txt | head -1)"
}
{
for w in w-dense w-moe-12 w-tiny; do
  for mb in 0 16 48 0 16; do
    [ $(left) -gt 250 ] || break 2
    step "$w mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb fusegraph bench --workload $w --compare fused,graph --steps 50
  done
  step "$w mb=16 early" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_EARLY_TRIGGER=1 fusegraph bench --workload $w --compare fused,graph --steps 50
done
# The tenth session's opt-in fusion, and the norm prologue again now that the
# weights can stream before the wait.
for w in w-moe-12 w-moe-48; do
  [ $(left) -gt 230 ] || break
  step "$w moe_weighted_sum_add" fusegraph bench --workload $w --compare fused,graph --steps 50 --enable-fusion moe_weighted_sum_add
  step "$w default" fusegraph bench --workload $w --compare fused,graph --steps 50
done
# The norm prologue, decided by cost since the tenth session (W-tiny: every
# norm; W-dense: none): W-tiny with it off, W-dense with every prologue
# forced (slowdown 0), each with and without the weight prefetch.
for mb in 0 16; do
  [ $(left) -gt 230 ] || break
  step "w-tiny no rms_norm_matmul mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb fusegraph bench --workload w-tiny --compare fused,graph --steps 50 --disable-fusion rms_norm_matmul
  step "w-tiny default mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb fusegraph bench --workload w-tiny --compare fused,graph --steps 50
  step "w-dense all norm prologues mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0 fusegraph bench --workload w-dense --compare fused,graph --steps 50
done
for w in w-dense w-moe-12; do
  for slots in 1 3 1 3; do
    echo "== $w prefill 512, FG_DEBUG_WORKSPACE_SLOTS=$slots"
    FG_DEBUG_WORKSPACE_SLOTS=$slots timeout 60 fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
    grep -E "prefill_512  |gemm|matmul" /tmp/p.txt | head -6
  done
done
for mb in 0 16; do
  echo "== w-dense breakdown mb=$mb"
  FG_DEBUG_PDL_PREFETCH_MB=$mb timeout 60 fusegraph bench --workload w-dense --compare fused,graph --steps 20 --breakdown > /tmp/bd.txt 2>&1
  sed -n '/graph-fused/,$p' /tmp/bd.txt | head -30
done
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s"
{
gm() { case $1 in dense) echo "--model dense" ;; moe12) echo "--model moe --layers 12" ;; tiny) echo "--model tiny" ;; esac; }
for w in dense:w-dense moe12:w-moe-12 tiny:w-tiny; do
  [ $(left) -gt 60 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f decode"; timeout 60 bash .gpu/peers/ggml-bench.sh $(gm $m) --reps 200 2>&1 | grep RESULT
  step "fusegraph $f mb=0" FG_DEBUG_PDL_PREFETCH_MB=0 fusegraph bench --workload $f --compare fused,graph --steps 50
  step "fusegraph $f mb=16" FG_DEBUG_PDL_PREFETCH_MB=16 fusegraph bench --workload $f --compare fused,graph --steps 50
done
for w in dense:w-dense moe12:w-moe-12; do
  [ $(left) -gt 60 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f prefill 512"; timeout 90 bash .gpu/peers/ggml-bench.sh $(gm $m) --tokens 512 --L 0 --reps 10 2>&1 | grep RESULT
  echo "== fusegraph $f prefill 512"
  timeout 60 fusegraph bench --workload $f --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1; grep -E "prefill_512  " /tmp/p.txt
done
} 2>&1 | tee "$OUT/peers.txt"
NEW='GpuFlashPrefill*:*rope_prefill*:*matmul_add_prefill*:*rms_norm_mul_convert*:GpuDemo*:GpuAttention.*'
for tool in memcheck racecheck; do
  [ $(left) -gt 50 ] || break
  FG_DEBUG_PDL_PREFETCH_MB=16 GTEST_EXTRA="--gtest_filter=$NEW" timeout $(( $(left) / 2 )) bash scripts/gpu-sanitize.sh $tool > "$OUT/sanitize-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitize-$tool.txt" | tr '\n' ' ' | head -c 600)"
done
echo "done after $((SECONDS - S)) s"
