#!/usr/bin/env bash
# Twenty-seventh session, call 4 (the last of its device time): the status
# words' device mirror under the tests that call 3 failed on the test's side
# (a second generate without a reset continues the conversation; the test
# now resets), the status fences dropped (FG_DEBUG_STATUS_FENCE=0) under the
# same tests, a narrow memcheck (call 3's ran past its limit), then steps of
# the session's start (fusegraph-prev, main at 0328320), now, and now
# without the fences, alternating; W-tiny's breakdown; a prefill if time is
# left.
#   bash scripts/gpu-s27-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-420}
source scripts/gpu-call-lib.sh
F='GpuGreedyToken.*:GpuInputCheck*:GpuSession*:GpuDemo*'
timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
FG_DEBUG_STATUS_FENCE=0 FG_KERNEL_CACHE=/tmp/fgk-nf timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuGreedyToken.*:GpuInputCheck*:GpuSession*' > "$OUT/tests-nofence.txt" 2>&1
echo "tests without the fences rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-nofence.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 60 compute-sanitizer --tool memcheck $T \
    --gtest_filter='GpuInputCheck*:GpuGreedyToken.OneBlockGraph:*GpuFused*argsort*:*GpuFused*topk_moe_softmax*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $? at $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
# A step: environment $1 ("" or VAR=V), binary $2, workload $3.
stepe() {
  local envs="$1" b="$2" w="$3"
  [ "$(left)" -gt 30 ] || { echo "skipped: $envs $b $w"; return; }
  env $envs timeout 60 $b bench --workload "$w" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== $envs $b $w (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $w $b ${envs:-} (rc $rc): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2, $3, $4}')"
}
{
for r in 1 2 3; do
  stepe "" fusegraph-prev w-tiny
  stepe "" fusegraph w-tiny
  stepe "FG_DEBUG_STATUS_FENCE=0" fusegraph w-tiny
done
for w in w-moe-12 w-moe-12-q4_k w-dense; do
  stepe "" fusegraph-prev $w
  stepe "" fusegraph $w
done
[ "$(left)" -gt 50 ] && timeout 40 fusegraph bench --workload w-tiny --compare fused,graph --steps 10 \
  --warmup 3 --breakdown > "$OUT/breakdown-w-tiny.txt" 2>&1
[ "$(left)" -gt 60 ] && timeout 50 fusegraph bench --workload w-dense-q4_k --prefill 512 --steps 5 \
  --warmup 2 > "$OUT/prefill-w-dense-q4_k.txt" 2>&1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
