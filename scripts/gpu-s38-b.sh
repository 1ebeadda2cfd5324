#!/usr/bin/env bash
# The thirty-eighth session's second call: decode attention's tree merge
# (attention.cuh attnMergeSplits; the rule past 256 head-splits).
#   1. the attention tests (TreeMerge, the grid — its kvHeads-2 cases at
#      5000 rows take the tree — the load forms, replays, early loads);
#   2. the kernel at KV 8192 / 32768 with --pdl: the rule, one level
#      (FG_DEBUG_ATTN_MERGE_GROUP=0) and groups forced on W-dense;
#   3. W-moe-12 and W-dense steps at KV 8192, tree against one level;
#   4. memcheck over TreeMerge.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-b.sh 480  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-480}
source scripts/gpu-call-lib.sh
timeout 200 "$T" --gtest_filter='GpuAttentionOptions.TreeMerge:GpuAttention.*:GpuAttentionOptions.LoadFormsAndRingDepths:GpuAttentionReplay.*:GpuAttentionEarly.*:GpuAttentionOptions.SoftcapAndSinks' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|merge group" "$OUT/gtest.txt" | head -12
for f in "" "FG_DEBUG_ATTN_MERGE_GROUP=0" "FG_DEBUG_ATTN_MERGE_GROUP=6" "FG_DEBUG_ATTN_MERGE_GROUP=4" \
         "FG_DEBUG_ATTN_STEPS=2" "" "FG_DEBUG_ATTN_MERGE_GROUP=0"; do
  [ "$(left)" -gt 200 ] || break
  echo "== attention ${f:-rule}"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2)(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,7,8,11
done
for round in 1 2; do
  stepf w-moe-12 "" --kv 8192 --ctx 16384
  stepf w-moe-12 "FG_DEBUG_ATTN_MERGE_GROUP=0" --kv 8192 --ctx 16384
done
stepf w-dense "" --kv 8192 --ctx 16384
stepf w-dense "FG_DEBUG_ATTN_MERGE_GROUP=6" --kv 8192 --ctx 16384
if [ "$(left)" -gt 70 ]; then
  timeout 60 compute-sanitizer --tool memcheck "$T" --gtest_filter='GpuAttentionOptions.TreeMerge' > "$OUT/memcheck.txt" 2>&1
  echo "== memcheck (rc $?): $(summ "$OUT/memcheck.txt")"
fi
echo "call done after $((SECONDS - S)) s"
