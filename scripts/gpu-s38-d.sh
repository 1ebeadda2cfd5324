#!/usr/bin/env bash
# The thirty-eighth session's fourth call: the split form's merge with 32
# partials' loads in flight a thread, its items together (attnMergeSplits;
# FG_DEBUG_ATTN_MERGE_LOADS=16 is about the form before: 16 loads, one item
# at a time only where a thread has one item).
#   1. attention tests: the new bit-identity test, the tree, the grid,
#      replays, early loads, W-dense's shape, softcap and sinks;
#   2. the kernel at KV 8192 / 32768, T = 1, 2 with --pdl, 32 against 16, twice;
#   3. phase stamps at KV 8192 (W-moe, and W-moe with the tree of 9);
#   4. W-moe-12 and W-dense steps at KV 8192, 32 against 16.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-d.sh 420  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-420}
source scripts/gpu-call-lib.sh
timeout 150 "$T" --gtest_filter='GpuAttentionOptions.MergeLoadsBitIdentical:GpuAttentionOptions.TreeMerge:Grid/GpuAttention.*:GpuAttentionReplay.*:GpuAttentionEarly.*:GpuAttentionOptions.WDenseShape:GpuAttentionOptions.SoftcapAndSinks' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|MERGE_LOADS" "$OUT/gtest.txt" | head -12
for f in "" "FG_DEBUG_ATTN_MERGE_LOADS=16" "" "FG_DEBUG_ATTN_MERGE_LOADS=16"; do
  [ "$(left)" -gt 200 ] || break
  echo "== attention ${f:-rule}"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2)(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,7,8,11
done
for f in "" "FG_DEBUG_ATTN_MERGE_GROUP=9"; do
  [ "$(left)" -gt 150 ] || break
  env $f FG_DEBUG_ATTN_STAMPS=1 FG_KERNEL_CACHE=/tmp/fgk-stamps timeout 60 fg_bench_kernels --reps 2 --no-cublas --pdl \
    --benchmark_filter="^attention/w-moe/kv8192/f16/T1(/|$)" > "$OUT/stamps.txt" 2>&1
  echo "== stamps w-moe kv8192 ${f:-rule} (rc $?): $(stamps "$OUT/stamps.txt")"
done
for round in 1 2; do
  stepf w-moe-12 "" --kv 8192 --ctx 16384
  stepf w-moe-12 "FG_DEBUG_ATTN_MERGE_LOADS=16" --kv 8192 --ctx 16384
done
stepf w-dense "" --kv 8192 --ctx 16384
stepf w-dense "FG_DEBUG_ATTN_MERGE_LOADS=16" --kv 8192 --ctx 16384
echo "call done after $((SECONDS - S)) s"
