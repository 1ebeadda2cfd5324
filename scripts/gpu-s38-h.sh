#!/usr/bin/env bash
# The thirty-eighth session's last call: the split merge's o loop unrolled
# 32 in the ring form (kMergeUnroll; 16 before, FG_DEBUG_ATTN_MERGE_UNROLL=16).
# (At that call the rule was 32 in the ring form; it is 16 again since, so
# this script now compares 16 with 16: gpu-s39-a.sh times the batched 32.)
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-h.sh 170  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-170}
source scripts/gpu-call-lib.sh
timeout 100 "$T" --gtest_filter='GpuAttentionOptions.SplitMergeShapes:GpuAttentionOptions.TreeMerge:Grid/GpuAttention.*:GpuAttentionReplay.*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure" "$OUT/gtest.txt" | head -8
for f in "" "FG_DEBUG_ATTN_MERGE_UNROLL=16" "" "FG_DEBUG_ATTN_MERGE_UNROLL=16"; do
  [ "$(left)" -gt 40 ] || break
  echo "== attention ${f:-rule}"
  env $f timeout 40 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2)(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f3,4,7,8,11 | tr '\n' ';'; echo
done
STEP_TIMEOUT=40 stepf w-moe-12 "" --kv 8192 --ctx 16384
STEP_TIMEOUT=40 stepf w-moe-12 "FG_DEBUG_ATTN_MERGE_UNROLL=16" --kv 8192 --ctx 16384
echo "call done after $((SECONDS - S)) s"
