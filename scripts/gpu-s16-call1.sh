#!/usr/bin/env bash
# For the sixteenth session's first GPU call (written in the fifteenth,
# after its last call). In order, as the deadline allows:
# 1. the DP4A tests: the tiles asked of L2 ahead (FG_DEBUG_DP4A_L2_AHEAD,
#    new, opt-in) must give the same bits;
# 2. kernels at T = 1, W-dense q4_K and q8_0 and W-moe q4_K: the defaults,
#    L2 ahead 1 / 3, 24 warps an SM (--gemv-dp4a-warps; each run about 60 s);
# 3. steps: W-dense q4_K and W-moe-12 q4_K at the defaults and with L2
#    ahead 2, W-dense q4_0 at the defaults (the rule now takes q4_0: the
#    fifteenth session measured only =2);
# 4. the fused W-dense q4_K breakdown (its trace match failed in the
#    fifteenth session, after the unfused plan's in one process: records
#    now fall back to grid and block), then W-moe-12 q4_K's.
#   bash scripts/gpu-s16-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 120 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/tests-dp4a.txt" 2>&1
echo "DP4A tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-dp4a.txt")"
F='--benchmark_filter=^(matmul|fused.gated_matmul)(_id)?/w-(dense|moe)/.*/(q4_k|q8_0)/T1(/|$)'
{
kern "defaults" "$F"
kern "L2 ahead 1" --gemv-dp4a-l2-ahead=1 "$F"
kern "L2 ahead 3" --gemv-dp4a-l2-ahead=3 "$F"
} 2>&1 | tee "$OUT/kernels.txt"
# Why gate_up and down stream at 57 %: Nsight's memory and stall view of the
# DP4A kernels, defaults and L2 ahead 2 (one launch each, after warm-up).
if command -v ncu > /dev/null && [ $(left) -gt 330 ]; then
  for a in 0 2; do for m in gate_up down; do
    timeout 45 ncu --clock-control none -k regex:matmul --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section MemoryWorkloadAnalysis fg_bench_kernels --reps 1 --no-cublas --gemv-dp4a-l2-ahead=$a \
      "--benchmark_filter=^matmul/w-dense/$m/.*/q4_k/T1(/|\$)" > "$OUT/ncu-$m-l2-$a.txt" 2>&1
    echo "ncu $m L2 ahead $a rc $? after $((SECONDS - S)) s"
  done; done
fi
{
step w-dense-q4_k; step w-dense-q4_k FG_DEBUG_DP4A_L2_AHEAD=2
step w-moe-12-q4_k; step w-moe-12-q4_k FG_DEBUG_DP4A_L2_AHEAD=2
step w-dense-q4_0
} 2>&1 | tee "$OUT/steps.txt"
if [ $(left) -gt 100 ]; then
  timeout $(( $(left) - 5 )) fusegraph bench --workload w-dense-q4_k --compare fused,graph --steps 10 --breakdown > "$OUT/breakdown-q4_k.txt" 2>&1
  echo "breakdown rc $? after $((SECONDS - S)) s"
fi
if [ $(left) -gt 100 ]; then
  timeout $(( $(left) - 5 )) fusegraph bench --workload w-moe-12-q4_k --compare fused,graph --steps 10 --breakdown > "$OUT/breakdown-moe.txt" 2>&1
  echo "W-moe-12 breakdown rc $? after $((SECONDS - S)) s"
fi
echo "done after $((SECONDS - S)) s"
