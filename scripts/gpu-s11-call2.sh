#!/usr/bin/env bash
# The eleventh session's second GPU call. The first (gpu-s10-call1.sh) found
# the prefetch prologue (16 MiB) 4 % slower on W-dense, neutral on W-moe-12
# and 12 % faster on W-tiny; this call tells the GEMV prologue from the
# attention one and times a per-launch weight limit
# (FG_DEBUG_PDL_PREFETCH_MAX_MB, FG_DEBUG_PDL_PREFETCH_ATTN), while ggml-cuda
# builds in the background; then the tenth session's other opt-ins, ggml
# beside fusegraph on decode and the 512-token prefill, and compute-sanitizer
# over the ninth session's kernels and the prologues.
#   bash scripts/gpu-s11-call2.sh DEADLINE_S  (bundle with --peers, carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
step() { # label env... (the command last)
  local label=$1; shift
  timeout 90 env "$@" > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
  echo "$label $(grep -E 'graph-fused' /tmp/b.txt | head -1)"
}
{
for round in 1 2 3; do
  for w in w-tiny w-moe-12 w-dense; do
    step "$w r$round mb=0" FG_DEBUG_PDL_PREFETCH_MB=0 fusegraph bench --workload $w --compare fused,graph --steps 50
    step "$w r$round mb=16 all" FG_DEBUG_PDL_PREFETCH_MB=16 fusegraph bench --workload $w --compare fused,graph --steps 50
    step "$w r$round mb=16 attn only" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_PREFETCH_MAX_MB=0 fusegraph bench --workload $w --compare fused,graph --steps 50
    step "$w r$round mb=16 gemv only" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_PREFETCH_ATTN=0 fusegraph bench --workload $w --compare fused,graph --steps 50
    step "$w r$round mb=16 max4" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_PREFETCH_MAX_MB=4 fusegraph bench --workload $w --compare fused,graph --steps 50
    step "$w r$round mb=16 max16" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_PREFETCH_MAX_MB=16 fusegraph bench --workload $w --compare fused,graph --steps 50
    step "$w r$round mb=4 all" FG_DEBUG_PDL_PREFETCH_MB=4 fusegraph bench --workload $w --compare fused,graph --steps 50
  done
done
for w in w-moe-12 w-moe-48; do
  step "$w moe_weighted_sum_add" fusegraph bench --workload $w --compare fused,graph --steps 50 --enable-fusion moe_weighted_sum_add
  step "$w default" fusegraph bench --workload $w --compare fused,graph --steps 50
done
step "w-dense all norm prologues" FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0 fusegraph bench --workload w-dense --compare fused,graph --steps 50
step "w-dense default" fusegraph bench --workload w-dense --compare fused,graph --steps 50
for slots in 1 3 1 3; do
  echo "== w-moe-12 prefill 512, FG_DEBUG_WORKSPACE_SLOTS=$slots"
  FG_DEBUG_WORKSPACE_SLOTS=$slots timeout 60 fusegraph bench --workload w-moe-12 --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1
  grep -E "prefill_512  " /tmp/p.txt
done
for mb in 0 16; do
  echo "== w-tiny breakdown mb=$mb"
  FG_DEBUG_PDL_PREFETCH_MB=$mb timeout 60 fusegraph bench --workload w-tiny --compare fused,graph --steps 20 --breakdown > /tmp/bd.txt 2>&1
  sed -n '/graph-fused/,$p' /tmp/bd.txt | head -30
done
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s"
{
gm() { case $1 in dense) echo "--model dense" ;; moe12) echo "--model moe --layers 12" ;; tiny) echo "--model tiny" ;; esac; }
for w in dense:w-dense moe12:w-moe-12 tiny:w-tiny; do
  [ $(left) -gt 120 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f decode"; timeout 60 bash .gpu/peers/ggml-bench.sh $(gm $m) --reps 200 2>&1 | grep RESULT
  step "fusegraph $f mb=0" FG_DEBUG_PDL_PREFETCH_MB=0 fusegraph bench --workload $f --compare fused,graph --steps 50
  step "fusegraph $f mb=16 max4" FG_DEBUG_PDL_PREFETCH_MB=16 FG_DEBUG_PDL_PREFETCH_MAX_MB=4 fusegraph bench --workload $f --compare fused,graph --steps 50
done
for w in dense:w-dense moe12:w-moe-12; do
  [ $(left) -gt 100 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f prefill 512"; timeout 90 bash .gpu/peers/ggml-bench.sh $(gm $m) --tokens 512 --L 0 --reps 10 2>&1 | grep RESULT
  echo "== fusegraph $f prefill 512"
  timeout 60 fusegraph bench --workload $f --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1; grep -E "prefill_512  " /tmp/p.txt
done
} 2>&1 | tee "$OUT/peers.txt"
NEW='GpuFlashPrefill*:*rope_prefill*:*matmul_add_prefill*:*rms_norm_mul_convert*:GpuAttention.*:GpuDemo*'
for tool in memcheck racecheck; do
  [ $(left) -gt 50 ] || break
  FG_DEBUG_PDL_PREFETCH_MB=16 GTEST_EXTRA="--gtest_filter=$NEW" timeout $(( $(left) / 2 )) bash scripts/gpu-sanitize.sh $tool > "$OUT/sanitize-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitize-$tool.txt" | tr '\n' ' ' | head -c 600)"
done
echo "done after $((SECONDS - S)) s"
