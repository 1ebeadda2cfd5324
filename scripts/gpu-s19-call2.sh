#!/usr/bin/env bash
# The nineteenth session's second GPU call: q6_K's rows read by whole warps
# (EmitOptions::gemvDp4aQ6kWarp, Dp4aQ6KWarp in gemv_dp4a.cuh; written after
# the first call's Nsight Compute put the q6_K lm head on L2, 82.7 % busy,
# at 47 % of DRAM: each lane's two aligned loads around each piece ask L2
# for ~2.4x the bytes). Its tests (the same bits as the lane form), the
# q6_K kernels and steps against the lane form (FG_DEBUG_DP4A_Q6K_WARP=0,
# --gemv-dp4a-q6k-lanes), its tiles ahead, Nsight Compute's memory figures.
# (The eighteenth session's call-2 plan, attention's forms in steps, is
# scripts/gpu-s19-call4.sh.)
#   bash scripts/gpu-s19-call2.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_filter='GpuQuantGemv.Q4KDp4a*:GpuQuantGemv.Q6_K*' > "$OUT/tests-q6k.txt" 2>&1
echo "q6_K GEMV tests rc $?: $(summ "$OUT/tests-q6k.txt")"
timeout 100 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*' > "$OUT/quant-model.txt" 2>&1
echo "quantised model tests rc $?: $(summ "$OUT/quant-model.txt")"
Q='--benchmark_filter=^matmul/w-dense/(q\+o|gate_up|down|lm_head)/q6_k/T1(/|$)'
KERN_MIN_LEFT=150
kern "q6_K lanes (the old default)" --gemv-dp4a-q6k-lanes "$Q"
kern "q6_K warps (default: 1 row, 2 ahead)" "$Q"
kern "q6_K warps, 1 ahead" --gemv-dp4a-ahead=1 "$Q"
kern "q6_K warps, 3 ahead" --gemv-dp4a-ahead=3 "$Q"
kern "q6_K warps, 2 rows a warp, 1 ahead" --gemv-dp4a-unroll=4 --gemv-dp4a-ahead=1 "$Q"
kern "q6_K warps, 8 warps an SM, 3 ahead" --gemv-dp4a-warps=8 --gemv-dp4a-ahead=3 "$Q"
kern "q6_K lanes (again)" --gemv-dp4a-q6k-lanes "$Q"
if command -v ncu > /dev/null && [ "$(left)" -gt 260 ]; then
  timeout 80 ncu --clock-control none -k regex:matmul --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    fg_bench_kernels --reps 1 --no-cublas '--benchmark_filter=^matmul/w-dense/lm_head/q6_k/T1(/|$)' \
    > "$OUT/ncu-q6k-warp-lmhead.txt" 2>&1
  echo "ncu q6_K warp lm head rc $?"
fi
{
stepf w-dense-q6_k "FG_DEBUG_DP4A_Q6K_WARP=0"
stepf w-dense-q6_k ""
stepf w-dense-q6_k "FG_DEBUG_DP4A_Q6K_AHEAD=3"
stepf w-dense-q6_k "FG_DEBUG_DP4A_Q6K_AHEAD=1"
stepf w-dense-q6_k ""
stepf w-dense-q6_k "FG_DEBUG_DP4A_Q6K_WARP=0"
stepf w-dense-q4_k_m ""
stepf w-dense-q4_k_m "FG_DEBUG_DP4A_Q6K_WARP=0"
stepf w-dense-q4_k ""
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
