#!/usr/bin/env bash
# The thirty-eighth session's sixth call: the ring form at one block an SM
# where two would give the merge more than 264 (split, head) partials
# (AttentionEmitter.cpp; W-moe at T = 1).
#   1. attention tests: the grid (its group-8 cases at 8192 rows take one
#      block an SM now), the tree, replays, early loads, W-dense's shape,
#      softcap and sinks;
#   2. the kernel at KV 8192 / 32768, T = 1, 2 with --pdl: the rule against
#      two blocks an SM (FG_DEBUG_ATTN_BLOCKS_PER_SM=2, the form before);
#   3. W-moe-12 (f16 and q4_K) steps at KV 8192 and 32768, the rule against 2.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-f.sh 400  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
timeout 150 "$T" --gtest_filter='GpuAttentionOptions.TreeMerge:Grid/GpuAttention.*:GpuAttentionReplay.*:GpuAttentionEarly.*:GpuAttentionOptions.WDenseShape:GpuAttentionOptions.SoftcapAndSinks:GpuAttentionOptions.Group12TwoHeadChunks' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure" "$OUT/gtest.txt" | head -12
for f in "" "FG_DEBUG_ATTN_BLOCKS_PER_SM=2"; do
  echo "== attention ${f:-rule}"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2)(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f3,4,7,8,11 | tr '\n' ';'; echo
done
for round in 1 2; do
  for w in w-moe-12 w-moe-12-q4_k; do
    stepf $w "" --kv 8192 --ctx 16384
    stepf $w "FG_DEBUG_ATTN_BLOCKS_PER_SM=2" --kv 8192 --ctx 16384
  done
done
STEP_TIMEOUT=100 stepf w-moe-12 "" --kv 32768 --ctx 65536
STEP_TIMEOUT=100 stepf w-moe-12 "FG_DEBUG_ATTN_BLOCKS_PER_SM=2" --kv 32768 --ctx 65536
echo "call done after $((SECONDS - S)) s"
