#!/usr/bin/env bash
# The thirty-eighth session's last call: the split merge in one pass (m and
# l loaded beside o, a running maximum: attnMergeOnePass) against two.
#   1. attention tests: one pass and two, the tree (its group level in one
#      pass), the grid, replays, early loads, W-dense's shape, sinks;
#   2. the kernel at KV 8192 / 32768, T = 1, 2 with --pdl: one pass against
#      two (FG_DEBUG_ATTN_MERGE_ONE_PASS=0), twice; the merge's stamps;
#   3. W-moe-12 and W-dense steps at KV 8192, one pass against two.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-g.sh 400  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
timeout 150 "$T" --gtest_filter='GpuAttentionOptions.MergeOnePassAndTwo:GpuAttentionOptions.TreeMerge:Grid/GpuAttention.*:GpuAttentionReplay.*:GpuAttentionEarly.*:GpuAttentionOptions.WDenseShape:GpuAttentionOptions.SoftcapAndSinks:GpuAttentionOptions.SinksPrefillFiveTokensGroup8:GpuAttentionOptions.Window100LongKvF32' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|one pass" "$OUT/gtest.txt" | head -12
for f in "" "FG_DEBUG_ATTN_MERGE_ONE_PASS=0" "" "FG_DEBUG_ATTN_MERGE_ONE_PASS=0"; do
  echo "== attention ${f:-rule}"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2)(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f3,4,7,8,11 | tr '\n' ';'; echo
done
for f in "" "FG_DEBUG_ATTN_MERGE_ONE_PASS=0"; do
  for w in dense moe; do
    env $f FG_DEBUG_ATTN_STAMPS=1 FG_KERNEL_CACHE=/tmp/fgk-stamps timeout 60 fg_bench_kernels --reps 2 --no-cublas --pdl \
      --benchmark_filter="^attention/w-$w/kv8192/f16/T1(/|$)" > "$OUT/stamps.txt" 2>&1
    echo "== stamps w-$w kv8192 ${f:-rule} (rc $?): $(stamps "$OUT/stamps.txt")"
  done
done
for round in 1 2; do
  stepf w-moe-12 "" --kv 8192 --ctx 16384
  stepf w-moe-12 "FG_DEBUG_ATTN_MERGE_ONE_PASS=0" --kv 8192 --ctx 16384
done
stepf w-dense "" --kv 8192 --ctx 16384
stepf w-dense "FG_DEBUG_ATTN_MERGE_ONE_PASS=0" --kv 8192 --ctx 16384
echo "call done after $((SECONDS - S)) s"
