#!/usr/bin/env bash
# The forty-third session's last call: the input check's reads side by side
# (check.cuh CheckWalk's Off) under its GPU tests; the session's start
# (fusegraph-prev, 53f84f3) against this build, alternating; then as much
# of the GPU suite's untested third (call 5's shard 2 of 3 = shards 2 and 5
# of 6: gtest shards by test index modulo the count) as time leaves.
#   bash scripts/gpu-bundle.sh --prev /tmp/prev/build  (less fg_bench_*)
#   then bash scripts/gpu-s43-f.sh 270  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-270}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $T --gtest_brief=1 --gtest_filter='GpuInputCheck*:GpuSession*:GpuGreedyToken*' > "$OUT/check.txt" 2>&1
echo "input check tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/check.txt")"
{
for r in 1 2 3; do prevstep w-tiny; stepf w-tiny ""; done
for w in w-moe-12 w-dense; do prevstep $w; stepf $w ""; done
} 2>&1 | tee "$OUT/steps.txt"
for sh in 2 5; do
  L=$(( $(left) - 5 ))
  [ "$L" -gt 10 ] || break
  GTEST_SHARD_INDEX=$sh GTEST_TOTAL_SHARDS=6 timeout $L $T > "$OUT/shard$sh.txt" 2>&1
  echo "suite shard $sh/6 rc $? at $((SECONDS - S)) s: ok $(grep -c '^\[       OK' "$OUT/shard$sh.txt") failed $(grep -c '^\[  FAILED' "$OUT/shard$sh.txt") of $(grep -m1 -o 'Running [0-9]* tests' "$OUT/shard$sh.txt")"
  grep '^\[  FAILED' "$OUT/shard$sh.txt" | head -5
done
echo "call done after $((SECONDS - S)) s"
