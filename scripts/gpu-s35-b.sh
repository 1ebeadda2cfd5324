#!/usr/bin/env bash
# Thirty-fifth session, the short call (for a session with little device
# time left): the device draw's tests and racecheck, a greedy and a drawn
# W-tiny step against the previous build's greedy one, then the
# thirty-fourth session's short flash call (gpu-s34-b.sh) with what is left.
#   bash scripts/gpu-bundle.sh --prev /tmp/prev/build
#   bash scripts/gpu-s35-b.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-330}
source scripts/gpu-call-lib.sh
timeout 100 fusegraph_gpu_tests --gtest_filter='GpuSampling*:GpuGreedyToken*' > "$OUT/gtest-sample.txt" 2>&1
echo "== sampling tests (rc $?): $(summ "$OUT/gtest-sample.txt")"
grep -E "^vocab|Failure" "$OUT/gtest-sample.txt" | head -12
timeout 60 compute-sanitizer --tool racecheck fusegraph_gpu_tests --gtest_filter='GpuSampling.DeviceDraw*OneBlock' > "$OUT/racecheck-sample.txt" 2>&1
echo "== racecheck (rc $?): $(summ "$OUT/racecheck-sample.txt")"
timeout 60 fusegraph-prev bench --workload w-tiny --compare fused,graph --steps 30 > /tmp/p.txt 2>&1
echo "== prev w-tiny (rc $?): $(grep -E '^graph' /tmp/p.txt | awk '{print $1, $2}')"
stepf w-tiny ""
stepf w-tiny "" --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
echo "sampling part done after $((SECONDS - S)) s"
[ "$(left)" -gt 200 ] && bash scripts/gpu-s34-b.sh "$(left)"
echo "call done after $((SECONDS - S)) s"
