#!/usr/bin/env bash
# Twenty-seventh session, call 2: the float experts' fused down projection's
# GPU test (its result now named; call 1 found the test's lookup wrong, the
# steps faster) and the MoE routing made shorter (kernels/topk.cuh: each
# gate exp once, the rank keys read four at a time, thread j renormalising
# weight j: meant to be bit-identical), and the input check's and the greedy
# token's reads of host memory issued together (one round trip over the bus
# each on the step's path, not two or three). Tests against the CPU
# and across the topk launch / routing heads, the PDL delay build, memcheck,
# then steps of the session's start (fusegraph-prev, main at 0328320) and
# now alternating, and the breakdowns of W-moe-12 f16 and W-tiny.
#   bash scripts/gpu-s27-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
F='GpuMoeSumFloat.*:GpuRoutingHeads.*:GpuDemo*:GpuQuantMoeWorkload*:*GpuFused*topk*:*GpuFused*matmul_id*:GpuGreedyToken*:GpuInputCheck*:GpuSession*'
timeout 200 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 80 $T --gtest_brief=1 \
  --gtest_filter='GpuMoeSumFloat.*:GpuRoutingHeads.*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='GpuMoeSumFloat.*:*GpuFused*topk*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $? at $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
# A step with binary $1 (fusegraph or fusegraph-prev) on workload $2.
stepb() {
  local b="$1" w="$2"
  [ "$(left)" -gt 45 ] || { echo "skipped: $b $w"; return; }
  timeout 75 $b bench --workload "$w" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== $b $w (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $w $b (rc $rc): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/step.txt | tail -1)"
}
{
for r in 1 2 3; do
  for w in w-moe-12 w-moe-12-q4_k w-tiny w-dense; do
    stepb fusegraph-prev $w
    stepb fusegraph $w
  done
done
for w in w-moe-12 w-tiny; do
  [ "$(left)" -gt 60 ] || break
  timeout 50 fusegraph bench --workload $w --compare fused,graph --steps 10 --warmup 3 --breakdown \
    > "$OUT/breakdown-$w.txt" 2>&1
  echo "breakdown $w rc $?"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
