#!/usr/bin/env bash
# The twenty-third session's fourth GPU call: the pipelined Session's stop
# test (fixed: call 3's stop token occurred earlier in the run) in graph and
# eager mode, memcheck over it, and a Session's decode pipelined and not
# (`run --no-pipeline`), 600 tokens, alternating.
#   bash scripts/gpu-s23-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
timeout 60 $T --gtest_filter='GpuGreedyToken*:GpuSession*' > "$OUT/tests.txt" 2>&1
echo "tests rc $?: $(summ "$OUT/tests.txt")"
{
for w in w-tiny w-moe-12-q4_k w-tiny w-moe-12-q4_k; do
  for f in "" --no-pipeline; do
    [ "$(left)" -gt 70 ] || { echo "skipped run $w $f"; continue; }
    timeout 40 fusegraph run "$w" --device cuda --prompt-ids 1,2,3,4 --steps 600 $f > /tmp/run.txt 2>&1
    echo "== run $w ${f:-pipelined} (rc $?): $(grep -E '^decode' /tmp/run.txt)"
  done
done
} 2>&1 | tee "$OUT/steps.txt"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 30 ]; then
  timeout $(( $(left) - 5 )) compute-sanitizer --tool memcheck $T --gtest_filter='GpuGreedyToken.PipelinedSession*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
