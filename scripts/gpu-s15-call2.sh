#!/usr/bin/env bash
# The fifteenth session's second GPU call: the new defaults (the DP4A rule 1
# with experts, x shared a block, K-warp sums every 4 tiles, q6_K in the rule;
# call 1 measured them as opt-ins), in order as the deadline allows:
# 1. the quantised GPU tests at the defaults (every GpuQuantGemv, the
#    quantised models, workloads, prefill == decode);
# 2. steps: the defaults against the tensor cores (0) on W-dense q4_K,
#    Q4_K_M-like, W-moe-12 q4_K (and its 4.7 MB q / o on DP4A: MIN_MB=4),
#    q8_0, q4_0 (and =2: q4_0 on DP4A with the shared x);
# 3. racecheck and memcheck over the DP4A tests at the defaults;
# 4. kernels at T = 1 at the defaults (the fix: Google Benchmark's names end
#    in /iterations:N/manual_time, so no '$' in the filter).
#   bash scripts/gpu-s15-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 120 "$T" --gtest_filter='GpuQuantGemv.*:GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.Quantised*' > "$OUT/tests-default.txt" 2>&1
echo "quantised tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-default.txt")"
{
step w-dense-q4_k; step w-dense-q4_k FG_DEBUG_GEMV_DP4A=0
step w-moe-12-q4_k; step w-moe-12-q4_k FG_DEBUG_DP4A_MIN_MB=4
step w-dense-q4_0 FG_DEBUG_GEMV_DP4A=2; step w-dense-q4_0
step w-dense-q4_k_m; step w-dense-q8_0
} 2>&1 | tee "$OUT/steps.txt"
for tool in racecheck memcheck; do
  [ $(left) -gt 110 ] || { echo "skipped: $tool"; continue; }
  FG_UNDER_SANITIZER=$tool timeout 100 compute-sanitizer --tool $tool --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4aExact*' > "$OUT/$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(summ "$OUT/$tool.txt")"
done
kern "defaults" '--benchmark_filter=^(matmul|fused.gated_matmul)(_id)?/w-(dense|moe)/.*/(q4_k|q8_0|q4_0|q6_k)/T1/' | tee "$OUT/kernels.txt"
if [ $(left) -gt 95 ]; then
  timeout 90 fusegraph bench --workload w-dense-q4_k --steps 10 --breakdown > "$OUT/breakdown-q4_k.txt" 2>&1
  echo "breakdown rc $? after $((SECONDS - S)) s"
fi
echo "done after $((SECONDS - S)) s"
