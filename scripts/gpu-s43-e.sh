#!/usr/bin/env bash
# The forty-third session's fifth call: decode attention's cluster form on
# W-tiny's small heads (8 heads of 64, KV 1024: a quarter of its step) —
# cluster size, warps, steps — against the default, two rounds; then
# shard 2 of 3 of the whole GPU suite.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s43-e.sh 560  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
{
for r in 1 2; do
  stepf w-tiny ""
  for e in FG_DEBUG_ATTN_CLUSTER=4 FG_DEBUG_ATTN_CLUSTER=2 FG_DEBUG_ATTN_CLUSTER=0 \
           FG_DEBUG_ATTN_CLUSTER_WARPS=4 FG_DEBUG_ATTN_CLUSTER_STEPS=1 FG_DEBUG_ATTN_CLUSTER_STEPS=3 \
           FG_DEBUG_ATTN_EARLY=0; do
    stepf w-tiny "$e"
  done
done
} 2>&1 | tee "$OUT/steps.txt"
L=$(( $(left) - 15 ))
GTEST_SHARD_INDEX=2 GTEST_TOTAL_SHARDS=3 timeout $L $T --gtest_brief=1 > "$OUT/shard2.txt" 2>&1
echo "suite shard 2/3 rc $? at $((SECONDS - S)) s: $(summ "$OUT/shard2.txt")"
echo "call done after $((SECONDS - S)) s"
