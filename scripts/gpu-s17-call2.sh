#!/usr/bin/env bash
# The seventeenth session's second GPU call: tiles held in registers ahead
# of the DP4A GEMV's arithmetic (EmitOptions::gemvDp4aAhead, 1 before this
# session). Call 1 put the GEMV's fixed cost at ~3.2 us a launch; with one
# tile in flight a warp, the pipeline's fill (x quantised while one tile
# lands) and every tile after it wait a whole memory latency.
# - the DP4A tests (the same bits at 2 and 3 tiles ahead) and the merged forms;
# - kernels at T = 1, q4_K at 1, 2, 3 ahead; q8_0 and q4_0 at 1, 2;
# - steps W-dense q4_K at 1, 2, 3; W-moe-12 q4_K, W-dense q4_0, q8_0 at 1, 2.
#   bash scripts/gpu-s17-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-450}
source scripts/gpu-call-lib.sh
timeout 100 $T --gtest_filter='GpuQuantGemv.Q4KDp4a*:*GpuFused*matmul_multi*' > "$OUT/dp4a-tests.txt" 2>&1
echo "dp4a tests rc $?: $(summ "$OUT/dp4a-tests.txt")"
F='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/(q\+o|gate_up|down|lm_head)/q4_k/T1(/|$)'
G='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/(q\+o|gate_up|down)/(q8_0|q4_0)/T1(/|$)'
{
kern "q4_K, 1 ahead" "$F"
kern "q4_K, 2 ahead" --gemv-dp4a-ahead=2 "$F"
kern "q4_K, 3 ahead" --gemv-dp4a-ahead=3 "$F"
kern "q8_0 q4_0, 1 ahead" "$G"
kern "q8_0 q4_0, 2 ahead" --gemv-dp4a-ahead=2 "$G"
} 2>&1 | tee "$OUT/kernels.txt"
{
w=w-dense-q4_k
stepf $w ""
stepf $w "FG_DEBUG_DP4A_AHEAD=2"
stepf $w "FG_DEBUG_DP4A_AHEAD=3"
for w in w-moe-12-q4_k w-dense-q4_0 w-dense-q8_0; do
  stepf $w ""
  stepf $w "FG_DEBUG_DP4A_AHEAD=2"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
