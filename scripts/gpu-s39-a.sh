#!/usr/bin/env bash
# The thirty-ninth session's first call (written in the thirty-eighth):
#   1. the split merge's o loop in batches of 32 while 32 partials are left
#      (FG_DEBUG_ATTN_MERGE_UNROLL=32, attnMergeSplits) against the default
#      16: its bit-identity test, then the kernel at KV 8192 / 32768, T = 1,
#      2, 4 with --pdl, twice (call 9 of the thirty-eighth: a plain 32-wide
#      unroll was 1-3 % faster at T = 1, 9.5 % slower at W-dense T = 2);
#   2. W-moe-12 and W-dense steps at KV 8192, 32 against 16;
#   3. racecheck over the tree merge (never run under it).
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s39-a.sh 420  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-420}
source scripts/gpu-call-lib.sh
timeout 100 "$T" --gtest_filter='GpuAttentionOptions.SplitMergeShapes:Grid/GpuAttention.*:GpuAttentionReplay.*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure" "$OUT/gtest.txt" | head -8
for f in "" "FG_DEBUG_ATTN_MERGE_UNROLL=32" "" "FG_DEBUG_ATTN_MERGE_UNROLL=32"; do
  [ "$(left)" -gt 200 ] || break
  aenv "$f" '^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2|4)(/|$)'
done
for round in 1 2; do
  stepf w-moe-12 "" --kv 8192 --ctx 16384
  stepf w-moe-12 "FG_DEBUG_ATTN_MERGE_UNROLL=32" --kv 8192 --ctx 16384
done
stepf w-dense "" --kv 8192 --ctx 16384
stepf w-dense "FG_DEBUG_ATTN_MERGE_UNROLL=32" --kv 8192 --ctx 16384
if [ "$(left)" -gt 120 ]; then
  timeout 110 compute-sanitizer --tool racecheck "$T" --gtest_filter='GpuAttentionOptions.TreeMerge' > "$OUT/racecheck.txt" 2>&1
  echo "== racecheck (rc $?): $(summ "$OUT/racecheck.txt")"
fi
echo "call done after $((SECONDS - S)) s"
