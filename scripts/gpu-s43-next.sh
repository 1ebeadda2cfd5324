#!/usr/bin/env bash
# Written at the end of the forty-third session for the next one's first
# call (its device time was spent): the check's embedding gather
# (EmitOptions::checkGathers, off) under its new GPU test and the input
# check's, W-tiny / W-dense / W-moe-12 with it on and off alternating, then
# the GPU suite's part the session did not run (shard 5 of 6) and the merged
# forms' own cases.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s43-next.sh 560  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 90 $T --gtest_brief=1 --gtest_filter='GpuInputCheck*:GpuGreedyToken*' > "$OUT/check.txt" 2>&1
echo "check tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/check.txt")"
grep '\[check gather\]' "$OUT/check.txt"
G=FG_DEBUG_CHECK_GATHER=1
{
for r in 1 2 3; do stepf w-tiny ""; stepf w-tiny "$G"; done
for w in w-dense w-moe-12 w-moe-12-q4_k; do stepf $w ""; stepf $w "$G"; done
} 2>&1 | tee "$OUT/steps.txt"
L=$(( $(left) - 120 ))
[ "$L" -gt 30 ] && GTEST_SHARD_INDEX=5 GTEST_TOTAL_SHARDS=6 timeout $L $T > "$OUT/shard5.txt" 2>&1
echo "suite shard 5/6 rc $? at $((SECONDS - S)) s: ok $(grep -c '^\[       OK' "$OUT/shard5.txt") failed $(grep -c '^\[  FAILED' "$OUT/shard5.txt") of $(grep -m1 -o 'Running [0-9]* tests' "$OUT/shard5.txt")"
L=$(( $(left) - 5 ))
FG_DEBUG_MERGED_TC_SLOWDOWN=-1 timeout $L $T --gtest_brief=1 \
  --gtest_filter='Fused/GpuFused.*matmul_multi*:GpuQuantGemv.Q4KDp4aEveryForm' > "$OUT/multi.txt" 2>&1
echo "merged forms rc $? at $((SECONDS - S)) s: $(summ "$OUT/multi.txt")"
echo "call done after $((SECONDS - S)) s"
