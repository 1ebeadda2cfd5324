#!/usr/bin/env bash
# The twenty-third session's third GPU call: the pipelined greedy Session
# (step k + 1 enqueued before step k's token is read; the input check feeds
# the token from the status ring), its tests and the suites call 2's filter
# missed (parametric instances are Prefix/Suite.Case) or ran out of time for;
# a Session's decode on three workloads (run's decode line: wall, device and
# launch ms per step); memcheck over the pipelined sessions.
#   bash scripts/gpu-s23-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
timeout 120 $T --gtest_filter='GpuGreedyToken*:GpuSession*:GpuSampling*:GpuInputCheck*:GpuDemo.*:TraceGpu*' > "$OUT/tests.txt" 2>&1
echo "tests rc $?: $(summ "$OUT/tests.txt")"
grep -E '^\[  FAILED' "$OUT/tests.txt" | head
{
for w in w-tiny w-moe-12-q4_k w-dense w-tiny w-moe-12-q4_k; do
  [ "$(left)" -gt 150 ] || { echo "skipped run $w"; continue; }
  timeout 60 fusegraph run "$w" --device cuda --prompt-ids 1,2,3,4 --steps 200 > /tmp/run.txt 2>&1
  echo "== run $w (rc $?): $(grep -E '^decode' /tmp/run.txt)"
done
stepf w-tiny ""
} 2>&1 | tee "$OUT/steps.txt"
timeout $(( $(left) / 2 )) $T --gtest_filter='Types/*' > "$OUT/tests-quant.txt" 2>&1
echo "quant rc $?: $(summ "$OUT/tests-quant.txt")"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 40 ]; then
  timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck $T --gtest_filter='GpuGreedyToken.PipelinedSession*:GpuGreedyToken.SessionTakes*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
