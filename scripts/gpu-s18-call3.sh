#!/usr/bin/env bash
# The eighteenth session's third GPU call: decode attention's cluster form
# (EmitOptions::attentionCluster, FG_DEBUG_ATTN_CLUSTER=N; written after
# call 2's Nsight Compute run: one warp a scheduler, an instruction every
# 7.5 cycles, 128 blocks of 4 warps, then a fence, an atomic and two L2
# round trips for the merge):
# - its GPU tests (against the reference, replays to the same bits) and
#   compute-sanitizer memcheck over its kernel benchmark;
# - the kernel at KV 1024 (W-dense, W-moe) at the defaults and clusters of
#   8 blocks of 8 and 4 warps, 4 of 8;
# - steps, alternating defaults and the cluster form: W-dense q4_K twice,
#   W-moe-12 q4_K, W-dense f16; then W-dense q6_K (issue 14's target, not
#   timed since q6_K went to DP4A) and the DP4A form tests with the deferred
#   norm as the default.
#   bash scripts/gpu-s18-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_filter='GpuAttentionOptions.ClusterForm:GpuAttentionOptions.WDenseShape:GpuAttentionReplay.*' \
  > "$OUT/attn-tests.txt" 2>&1
echo "attention tests rc $?: $(summ "$OUT/attn-tests.txt")"
A='--benchmark_filter=^attention/(w-dense|w-moe)/kv1024/f16/T1(/|$)'
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck fg_bench_kernels --reps 1 --no-cublas --attn-cluster=8 "$A" \
    > "$OUT/memcheck-cluster.txt" 2>&1
  echo "memcheck, cluster form, rc $?: $(summ "$OUT/memcheck-cluster.txt")"
fi
{
akern "defaults" "$A"
akern "cluster 8, 8 warps" --attn-cluster=8 "$A"
akern "cluster 8, 4 warps" --attn-cluster=8 --attn-cluster-warps=4 "$A"
akern "cluster 4, 8 warps" --attn-cluster=4 "$A"
akern "defaults" "$A"
} 2>&1 | tee "$OUT/attention.txt"
{
w=w-dense-q4_k
stepf $w ""
stepf $w "FG_DEBUG_ATTN_CLUSTER=8"
stepf $w ""
stepf $w "FG_DEBUG_ATTN_CLUSTER=8"
stepf $w "FG_DEBUG_ATTN_CLUSTER=8 FG_DEBUG_ATTN_CLUSTER_WARPS=4"
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_ATTN_CLUSTER=8"
stepf w-dense ""
stepf w-dense "FG_DEBUG_ATTN_CLUSTER=8"
stepf w-dense-q6_k ""
} 2>&1 | tee "$OUT/steps.txt"
if [ "$(left)" -gt 80 ]; then
  timeout $(( $(left) - 10 )) $T --gtest_filter='GpuQuantGemv.Q4KDp4aEveryForm' > "$OUT/dp4a-tests.txt" 2>&1
  echo "dp4a form tests rc $?: $(summ "$OUT/dp4a-tests.txt")"
fi
echo "done after $((SECONDS - S)) s"
