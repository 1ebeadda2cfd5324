#!/usr/bin/env bash
# For the twentieth session's first GPU call (written in the nineteenth, whose
# device time ran out in refused starts before its own plan for them ran):
# - q4_K, q8_0 and q4_0 read by whole warps (EmitOptions::gemvDp4aWarpLoad,
#   opt-in, Dp4aWarpOf): the DP4A tests' same-bits checks, the quantised
#   models with it on, compute-sanitizer racecheck and memcheck over the
#   per-warp stage (q6_K's default form included), kernels and steps
#   against the lane forms (W-dense q4_K / q8_0 / q4_0, W-moe-12 q4_K);
# - if it is faster: EmitOptions::gemvDp4aWarpLoad = true.
#   bash scripts/gpu-s20-call1.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 120 $T --gtest_filter='GpuQuantGemv.Q4KDp4a*:GpuQuantGemv.Q6_K*' > "$OUT/tests-warp-load.txt" 2>&1
echo "DP4A GEMV tests rc $?: $(summ "$OUT/tests-warp-load.txt")"
FG_DEBUG_DP4A_WARP_LOAD=1 timeout 100 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*' \
  > "$OUT/quant-model-warp-load.txt" 2>&1
echo "quantised model tests, whole warps, rc $?: $(summ "$OUT/quant-model-warp-load.txt")"
W='--benchmark_filter=^matmul/w-dense/(q\+o|gate_up)/(q4_k|q8_0|q4_0|q6_k)/T1(/|$)'
if command -v compute-sanitizer > /dev/null; then
  for tool in racecheck memcheck; do
    timeout 60 compute-sanitizer --tool $tool fg_bench_kernels --reps 1 --no-cublas --gemv-dp4a-warp-load "$W" \
      > "$OUT/sanitize-warp-$tool.txt" 2>&1
    echo "compute-sanitizer $tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-warp-$tool.txt")"
  done
fi
Q='--benchmark_filter=^matmul/w-dense/(q\+o|gate_up|down|lm_head)/(q4_k|q8_0|q4_0)/T1(/|$)'
KERN_MIN_LEFT=150
kern "lanes (default)" "$Q"
kern "whole warps (--gemv-dp4a-warp-load)" --gemv-dp4a-warp-load "$Q"
{
stepf w-dense-q8_0 ""
stepf w-dense-q8_0 "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-dense-q4_k ""
stepf w-dense-q4_k "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-dense-q4_0 ""
stepf w-dense-q4_0 "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-dense-q4_k "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-dense-q4_k ""
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
