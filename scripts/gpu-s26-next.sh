#!/usr/bin/env bash
# Written at the end of the twenty-fifth session for the next one's first GPU
# call (no device time was left): the GEMV tails' local form
# (EmitOptions::gemvLocalTails, FG_DEBUG_GEMV_LOCAL_TAILS=1: each block of a
# plain GEMV runs q's rope, k's rope + cache write and v's cache write on the
# rows it stored, no ticket). Tests (bit identity against no tails, the CPU),
# the usual GPU set with it on, the PDL delay build, memcheck, then steps with
# it off and on alternating, and W-tiny's breakdown with it.
#   bash scripts/gpu-s26-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.*' > "$OUT/tails.txt" 2>&1
echo "tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantWorkload*:GpuQuantMoeWorkload*:GpuAttentionEarly.*:GpuGreedyToken*:GpuInputCheck*'
FG_DEBUG_GEMV_LOCAL_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-l timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with local tails rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
FG_DEBUG_GEMV_LOCAL_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuGemvTails.Local*:GpuDemo*:GpuPrefillThenDecode*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='GpuGemvTails.Local*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2; do
  for w in w-tiny w-dense w-moe-12; do
    stepf $w "FG_DEBUG_GEMV_LOCAL_TAILS=0"
    stepf $w "FG_DEBUG_GEMV_LOCAL_TAILS=1"
  done
done
[ "$(left)" -gt 50 ] && FG_DEBUG_GEMV_LOCAL_TAILS=1 timeout 45 fusegraph bench --workload w-tiny \
  --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-w-tiny.txt" 2>&1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
