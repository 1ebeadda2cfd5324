#!/usr/bin/env bash
# For the nineteenth session's first GPU call (written in the eighteenth,
# after its last call):
# - the GPU tests at the eighteenth session's new defaults, which ran only
#   in their own tests there: decode attention's cluster form (caches of up
#   to 4096 rows: every whole-model test) and the DP4A norm prologue's rstd
#   deferred (the quantised models);
# - where the q6_K DP4A GEMV's time goes (W-dense q6_K: 3.81 ms a step
#   against issue 14's 1.8; its lm head at 50.8 % of the bandwidth, q4_K's
#   at 86.5 %): Nsight Compute on the lm head with warp-state and
#   source-level (SASS) stall counts; its bytes in flight swept, in kernels
#   and steps.
# (scripts/gpu-s19-call2.sh: the attention's forms in steps, the q6_K breakdown.)
#   bash scripts/gpu-s19-call1.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 170 $T --gtest_filter='GpuAttention*:*GpuFused*attention*:GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuDeviceOutput*:GpuSampling*' \
  > "$OUT/tests-defaults.txt" 2>&1
echo "attention, demo, session, prefill-then-decode tests rc $?: $(summ "$OUT/tests-defaults.txt")"
timeout 120 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*' > "$OUT/quant-model.txt" 2>&1
echo "quantised model tests rc $?: $(summ "$OUT/quant-model.txt")"
L='--benchmark_filter=^matmul/w-dense/lm_head/q6_k/T1(/|$)'
if command -v ncu > /dev/null; then
  timeout 90 ncu --clock-control none -k regex:matmul --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section InstructionStats --print-details all \
    fg_bench_kernels --reps 1 --no-cublas "$L" > "$OUT/ncu-q6k-lmhead.txt" 2>&1
  echo "ncu q6_K lm head rc $?"
  timeout 90 ncu --clock-control none -k regex:matmul --launch-skip 3 --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    fg_bench_kernels --reps 1 --no-cublas "$L" > "$OUT/ncu-q6k-lmhead-sass.csv" 2>&1
  echo "ncu q6_K lm head, SASS rc $?"
fi
# Bytes in flight: a q6_K lane holds 8 16-byte loads a row (33 registers)
# for ~52 bytes of its super-block, one row a warp and one tile ahead at 16
# warps an SM (106 registers), so an SM has ~27 KB of useful bytes in
# flight (q4_K at two ahead: ~75 KB) — by Little's law about the 2.3 TB/s
# measured. More ahead at 16 warps spills (128 registers: 24-200 bytes);
# at 8 warps an SM it does not (NVRTC here: 2 ahead 146 registers, 3 ahead
# 174, 4 rows a warp 169, both 235).
Q='--benchmark_filter=^matmul/w-dense/(q\+o|gate_up|down|lm_head)/q6_k/T1(/|$)'
KERN_MIN_LEFT=150
kern "q6_K defaults" "$Q"
kern "q6_K 8 warps, 2 ahead" --gemv-dp4a-warps=8 --gemv-dp4a-ahead=2 "$Q"
kern "q6_K 8 warps, 3 ahead" --gemv-dp4a-warps=8 --gemv-dp4a-ahead=3 "$Q"
kern "q6_K 8 warps, 4 rows a warp" --gemv-dp4a-warps=8 --gemv-dp4a-unroll=4 "$Q"
kern "q6_K 8 warps, 4 rows, 2 ahead" --gemv-dp4a-warps=8 --gemv-dp4a-unroll=4 --gemv-dp4a-ahead=2 "$Q"
{
stepf w-dense-q6_k ""
stepf w-dense-q6_k "FG_DEBUG_DP4A_WARPS=8 FG_DEBUG_DP4A_AHEAD=2"
stepf w-dense-q6_k "FG_DEBUG_DP4A_WARPS=8 FG_DEBUG_DP4A_AHEAD=3"
stepf w-dense-q6_k "FG_DEBUG_DP4A_WARPS=8 FG_DEBUG_DP4A_UNROLL=4"
stepf w-dense-q6_k ""
stepf w-dense-q4_k_m "" # the Q4_K_M-like mix: q6_K lm head and half the downs
stepf w-dense-q4_k_m "FG_DEBUG_DP4A_Q6K_WARPS=8 FG_DEBUG_DP4A_Q6K_AHEAD=2" # q6_K's own knobs
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
