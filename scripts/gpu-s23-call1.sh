#!/usr/bin/env bash
# The twenty-third session's GPU call: a step in one call (the input check
# copies tokens and positions from the mapped pinned staging; the status
# words in host memory) and the greedy token picked on the device.
# Tests (the new GpuGreedyToken cases, the input check in every mode, the
# sessions, sampling, prefill-then-decode, the demo, replays), memcheck over
# the new kernels, then the previous build (fusegraph-prev, HEAD before the
# session) and this one alternating on the same workloads: bench steps (wall,
# GPU and host ms) and `run` (a Session: decode ms/step with sampling).
#   bash scripts/gpu-s23-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 170 $T --gtest_filter='GpuGreedyToken*:GpuInputCheck*:GpuSession*:GpuSampling*:GpuDemo*:GpuPrefillThenDecode*:GpuDeviceOutput*:GpuAttentionReplay*:GpuWeightInit*' > "$OUT/tests.txt" 2>&1
echo "tests rc $?: $(summ "$OUT/tests.txt")"
grep -E '^\[  FAILED' "$OUT/tests.txt" | head
bstep() { # BIN WORKLOAD: graph rows of bench (fused, unfused) with host ms
  local bin="$1" w="$2"
  [ "$(left)" -gt 45 ] || { echo "skipped: $bin $w"; return; }
  timeout 75 $bin bench --workload "$w" --compare fused,graph --steps 50 > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== $bin $w (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $bin $w (rc $rc)"; grep -E '^ *(mode|graph)|wall ms' /tmp/step.txt | head -4
}
rstep() { # BIN WORKLOAD: a Session's decode, greedy, 200 tokens
  local bin="$1" w="$2"
  [ "$(left)" -gt 40 ] || { echo "skipped run: $bin $w"; return; }
  timeout 60 $bin run "$w" --device cuda --prompt-ids 1,2,3,4 --steps 200 > /tmp/run.txt 2>&1
  echo "== run $bin $w (rc $?): $(grep -E '^decode' /tmp/run.txt)"
  { echo "== run $bin $w"; cat /tmp/run.txt; } >> "$OUT/runs-full.txt"
}
{
for w in w-tiny w-moe-12-q4_k w-tiny w-moe-12-q4_k; do
  bstep fusegraph-prev $w
  bstep fusegraph $w
done
for w in w-tiny w-moe-12-q4_k w-dense; do
  rstep fusegraph-prev $w
  rstep fusegraph $w
  rstep fusegraph-prev $w
  rstep fusegraph $w
done
bstep fusegraph-prev w-dense
bstep fusegraph w-dense
} 2>&1 | tee "$OUT/steps.txt"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 50 ]; then
  timeout 45 compute-sanitizer --tool memcheck $T --gtest_filter='GpuGreedyToken.OneBlockGraph:GpuGreedyToken.ManyBlocksEager:GpuInputCheck.EagerModeReportsTheSame' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
