#!/usr/bin/env bash
# For the fifteenth session's first GPU call (written in the fourteenth,
# after its last call). In order, as the deadline allows:
# 1. the DP4A tests (now with q6_K, the shared x quantisation and the
#    combine every 3 tiles, FG_DEBUG_DP4A_SHARE_X=1 / _COMBINE=3, which must
#    give the same bits: every form checks it);
# 2. kernels at T = 1: DP4A per-warp x against shared x, and with the
#    K-warps' sums combined every 4 tiles (q4_K, q8_0, q4_0, q6_K; W-dense
#    and W-moe shapes, expert-indexed too), and the tensor cores;
# 3. steps: the new default (DP4A above 8 MiB, q4_K / q8_0) against the
#    tensor cores (0), and with the shared x, on W-dense q4_K / q8_0 / q4_0
#    (q4_0 with =2: is its 27 % step regression the x quantisation?),
#    W-moe-12 q4_K (and =1 with shared x: the experts) and Q4_K_M-like
#    (with q6_K on DP4A too: FG_DEBUG_DP4A_Q6K=1, its lm head and downs);
# 4. racecheck and memcheck over the DP4A tests with both opt-ins (new
#    shared-memory buffers and barriers), if time is left; else the next call.
#   bash scripts/gpu-s15-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 200 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*:GpuQuantGemv.Q6_K*' > "$OUT/tests-dp4a.txt" 2>&1
echo "DP4A tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-dp4a.txt")"
F='--benchmark_filter=^(matmul|fused.gated_matmul)(_id)?/w-(dense|moe)/.*/(q4_k|q8_0|q4_0|q6_k)/T1$'
{
kern "tensor cores" --no-gemv-dp4a "$F"
kern "dp4a, x per warp" --gemv-dp4a "$F"
kern "dp4a, x shared" --gemv-dp4a --gemv-dp4a-share-x "$F"
kern "dp4a, x shared, sums every 4 tiles" --gemv-dp4a --gemv-dp4a-share-x --gemv-dp4a-combine=4 "$F"
} 2>&1 | tee "$OUT/kernels.txt"
{
step w-dense-q4_k FG_DEBUG_GEMV_DP4A=0; step w-dense-q4_k; step w-dense-q4_k FG_DEBUG_DP4A_SHARE_X=1
step w-dense-q4_k FG_DEBUG_DP4A_SHARE_X=1 FG_DEBUG_DP4A_COMBINE=4
step w-dense-q4_k_m; step w-dense-q4_k_m FG_DEBUG_DP4A_SHARE_X=1 FG_DEBUG_DP4A_Q6K=1
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=0; step w-moe-12-q4_k
step w-moe-12-q4_k FG_DEBUG_DP4A_SHARE_X=1 FG_DEBUG_DP4A_MIN_MB=4
step w-moe-12-q4_k FG_DEBUG_DP4A_SHARE_X=1 FG_DEBUG_GEMV_DP4A=1
step w-dense-q8_0 FG_DEBUG_GEMV_DP4A=0; step w-dense-q8_0; step w-dense-q8_0 FG_DEBUG_DP4A_SHARE_X=1
step w-dense-q4_0 FG_DEBUG_GEMV_DP4A=0; step w-dense-q4_0 FG_DEBUG_GEMV_DP4A=2 FG_DEBUG_DP4A_SHARE_X=1
step w-dense-q4_k_m FG_DEBUG_GEMV_DP4A=0
} 2>&1 | tee "$OUT/steps.txt"
for tool in racecheck memcheck; do
  [ $(left) -gt 160 ] || { echo "skipped: $tool"; continue; }
  FG_DEBUG_DP4A_SHARE_X=1 FG_DEBUG_DP4A_COMBINE=3 FG_UNDER_SANITIZER=$tool timeout 150 compute-sanitizer --tool $tool --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4aExact*' > "$OUT/$tool.txt" 2>&1
  echo "$tool (shared x) rc $? after $((SECONDS - S)) s: $(summ "$OUT/$tool.txt")"
done
echo "done after $((SECONDS - S)) s"
