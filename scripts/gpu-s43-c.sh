#!/usr/bin/env bash
# The forty-third session's third call: the greedy token's grid. A grid of
# one block now takes its winner without atomics or a ticket
# (kernels/greedy.cuh); EmitOptions::greedyPerThread (FG_DEBUG_GREEDY_PER_THREAD)
# sets how many values a thread scans at least (4: W-tiny's 32000 logits in
# 8 blocks; 8: 4 blocks; 32: one block). Greedy tests at 32 and at the
# default; W-tiny steps alternating; then shard 1 of 3 of the whole GPU
# suite (the merged q / k / v tails on) with what time is left.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s43-c.sh 560  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
G='GpuGreedyToken*:GpuSampling*:GpuDemo*'
FG_DEBUG_GREEDY_PER_THREAD=32 timeout 100 $T --gtest_brief=1 --gtest_filter="$G" > "$OUT/greedy32.txt" 2>&1
echo "greedy tests at 32 rc $? at $((SECONDS - S)) s: $(summ "$OUT/greedy32.txt")"
{
for r in 1 2 3; do
  for v in 4 8 32; do stepf w-tiny "FG_DEBUG_GREEDY_PER_THREAD=$v"; done
done
stepf w-dense ""
stepf w-dense "FG_DEBUG_GREEDY_PER_THREAD=32"
stepf w-moe-12 ""
stepf w-moe-12 "FG_DEBUG_GREEDY_PER_THREAD=32"
} 2>&1 | tee "$OUT/steps.txt"
L=$(( $(left) - 15 ))
GTEST_SHARD_INDEX=0 GTEST_TOTAL_SHARDS=3 timeout $L $T --gtest_brief=1 > "$OUT/shard0.txt" 2>&1
echo "suite shard 0/3 rc $? at $((SECONDS - S)) s: $(summ "$OUT/shard0.txt")"
grep -c "^\[       OK\|^\[  FAILED" "$OUT/shard0.txt"
echo "call done after $((SECONDS - S)) s"
