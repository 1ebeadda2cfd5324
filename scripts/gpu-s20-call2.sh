#!/usr/bin/env bash
# The twentieth session's second GPU call: q4_K, q8_0 and q4_0 dense rows
# read by whole warps, now the default (EmitOptions::gemvDp4aWarpLoad),
# expert-indexed ones lane by lane (gemvDp4aWarpLoadExperts, off: call 1's
# W-moe-12 q4_K took 0.553 -> 0.578 ms with every launch read by whole
# warps). The DP4A tests and quantised models at the new defaults; W-moe-12
# q4_K with each split; its kernels lanes against whole warps (which launch
# lost); W-dense q4_K and the Q4_K_M-like mix against lanes; racecheck over
# the stage on small launches.
#   bash scripts/gpu-s20-call2.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_filter='GpuQuantGemv.Q4KDp4a*:GpuQuantGemv.Q6_K*' > "$OUT/tests-dp4a.txt" 2>&1
echo "DP4A GEMV tests rc $?: $(summ "$OUT/tests-dp4a.txt")"
timeout 100 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*' > "$OUT/quant-model.txt" 2>&1
echo "quantised model tests rc $?: $(summ "$OUT/quant-model.txt")"
{
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_DP4A_WARP_LOAD=0"
stepf w-moe-12-q4_k "FG_DEBUG_DP4A_WARP_LOAD_EXPERTS=1"
stepf w-moe-12-q4_k ""
stepf w-dense-q4_k ""
stepf w-dense-q4_k "FG_DEBUG_DP4A_WARP_LOAD=0"
} 2>&1 | tee "$OUT/steps.txt"
M='--benchmark_filter=^(matmul|matmul_id|fused.gated_matmul_id)/w-moe/.*/q4_k/T1(/|$)'
KERN_MIN_LEFT=170
kern "w-moe q4_K, experts lane by lane (default)" "$M"
kern "w-moe q4_K, experts by whole warps (--gemv-dp4a-warp-load)" --gemv-dp4a-warp-load "$M"
kern "w-moe q4_K, all lane by lane (--gemv-dp4a-lanes)" --gemv-dp4a-lanes "$M"
{
stepf w-dense-q4_k_m ""
stepf w-dense-q4_k_m "FG_DEBUG_DP4A_WARP_LOAD=0"
} 2>&1 | tee -a "$OUT/steps.txt"
R='--benchmark_filter=^matmul/w-dense/q\+o/(q4_0|q8_0)/T1(/|$)'
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 60 ]; then
  timeout $(( $(left) - 10 )) compute-sanitizer --tool racecheck fg_bench_kernels --reps 1 --no-cublas "$R" \
    > "$OUT/sanitize-racecheck.txt" 2>&1
  echo "compute-sanitizer racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/sanitize-racecheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
