#!/usr/bin/env bash
# The nineteenth session's third GPU call: q4_K, q8_0 and q4_0 read by whole
# warps too (EmitOptions::gemvDp4aWarpLoad, Dp4aWarpOf in gemv_dp4a.cuh;
# written after the second call showed q6_K's gain): their tests (the same
# bits as the lane forms, K-warps ending inside their span), compute-
# sanitizer racecheck over the whole-warp kernels (q6_K's
# default and the others'), kernels and steps against the lane forms.
# (The eighteenth session's plan for attention's forms in steps is
# scripts/gpu-s19-call4.sh.)
#   bash scripts/gpu-s19-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 80 $T --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/tests-warp-load.txt" 2>&1
echo "DP4A GEMV tests rc $?: $(summ "$OUT/tests-warp-load.txt")"
Q='--benchmark_filter=^matmul/w-dense/(q\+o|gate_up|down|lm_head)/(q4_k|q8_0|q4_0)/T1(/|$)'
KERN_MIN_LEFT=100
kern "lanes (default)" "$Q"
kern "whole warps (--gemv-dp4a-warp-load)" --gemv-dp4a-warp-load "$Q"
{
stepf w-dense-q8_0 ""
stepf w-dense-q8_0 "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-dense-q4_k ""
stepf w-dense-q4_k "FG_DEBUG_DP4A_WARP_LOAD=1"
stepf w-dense-q4_0 ""
stepf w-dense-q4_0 "FG_DEBUG_DP4A_WARP_LOAD=1"
} 2>&1 | tee "$OUT/steps.txt"
if [ "$(left)" -gt 45 ]; then
W='--benchmark_filter=^matmul/w-dense/(q\+o|gate_up)/(q4_k|q8_0|q6_k)/T1(/|$)'
if command -v compute-sanitizer > /dev/null; then
  for tool in racecheck; do # memcheck ran clean on q6_K's lane form; the stage is shared memory
    timeout $(( $(left) - 5 )) compute-sanitizer --tool $tool fg_bench_kernels --reps 1 --no-cublas --gemv-dp4a-warp-load "$W" \
      > "$OUT/sanitize-warp-$tool.txt" 2>&1
    echo "compute-sanitizer $tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-warp-$tool.txt")"
  done
fi
fi
echo "done after $((SECONDS - S)) s"
