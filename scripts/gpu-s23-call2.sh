#!/usr/bin/env bash
# The twenty-third session's second GPU call: the rest of the GPU suite that
# call 1 did not run (every suite but the slow quantised-kernel sweeps, in
# shards with a time limit each), the traced breakdown with the greedy-token
# launch, where a Session's decode step goes (run's device and launch
# columns beside bench), and whether a graph instantiated for device launch
# costs the host less to launch (FG_DEBUG_GRAPH_DEVICE_LAUNCH=1).
#   bash scripts/gpu-s23-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_filter='GpuOp*:GpuFused*:TraceGpu*:GpuAttention*:GpuFlashPrefill*:GpuAttentionPrefill*' > "$OUT/tests-a.txt" 2>&1
echo "tests A rc $?: $(summ "$OUT/tests-a.txt")"
grep -E '^\[  FAILED' "$OUT/tests-a.txt" | head
timeout 150 $T --gtest_filter='GpuGroupedExpert*:GpuQuantWorkload*:GpuQuantMoeWorkload*:GpuQuantModel*:GpuQuantGemv.Q4KDp4aEveryForm' > "$OUT/tests-b.txt" 2>&1
echo "tests B rc $?: $(summ "$OUT/tests-b.txt")"
grep -E '^\[  FAILED' "$OUT/tests-b.txt" | head
hstep() { # ENV WORKLOAD
  local envs="$1" w="$2"
  [ "$(left)" -gt 45 ] || { echo "skipped: $envs $w"; return; }
  env $envs timeout 75 fusegraph bench --workload "$w" --compare fused,graph --steps 50 > /tmp/step.txt 2>&1
  echo "== $w ${envs:-default} (rc $?): $(grep -E '^graph' /tmp/step.txt)"
  { echo "== $w $envs"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
}
{
for w in w-tiny w-dense w-tiny w-dense; do
  hstep "" $w
  hstep "FG_DEBUG_GRAPH_DEVICE_LAUNCH=1" $w
done
for w in w-tiny w-moe-12-q4_k; do
  timeout 60 fusegraph run "$w" --device cuda --prompt-ids 1,2,3,4 --steps 200 > /tmp/run.txt 2>&1
  echo "== run $w (rc $?): $(grep -E '^decode' /tmp/run.txt)"
done
timeout 90 fusegraph bench --workload w-tiny --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-w-tiny.txt" 2>&1
echo "== breakdown w-tiny rc $?"; grep -E 'input check|greedy token|^graph' "$OUT/breakdown-w-tiny.txt" | head -6
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
