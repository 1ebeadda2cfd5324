#!/usr/bin/env bash
# The forty-third session's fourth call: the cost model's two prologue /
# merge factors measured again now that projections carry their row work
# in their stores and launches overlap under PDL. Per workload, alternating:
# the default; every legal norm prologue (FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0);
# every tensor-core merge up to 64 MiB charged as one launch
# (FG_DEBUG_MERGED_TC_FREE_MB=64); both (W-dense: 5 launches a layer).
# Then shard 1 of 3 of the whole GPU suite.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s43-d.sh 560  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
N=FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0
M=FG_DEBUG_MERGED_TC_FREE_MB=64
{
for r in 1 2; do
  for w in w-dense w-moe-12; do
    stepf $w ""; stepf $w "$N"; stepf $w "$M"; stepf $w "$N $M"
  done
done
stepf w-moe-48 ""; stepf w-moe-48 "$N $M"
stepf w-tiny ""; stepf w-tiny "$N"
} 2>&1 | tee "$OUT/steps.txt"
L=$(( $(left) - 15 ))
GTEST_SHARD_INDEX=1 GTEST_TOTAL_SHARDS=3 timeout $L $T --gtest_brief=1 > "$OUT/shard1.txt" 2>&1
echo "suite shard 1/3 rc $? at $((SECONDS - S)) s: $(summ "$OUT/shard1.txt")"
echo "call done after $((SECONDS - S)) s"
