#!/usr/bin/env bash
# Twenty-fifth session, call 2: GEMV tails (EmitOptions::gemvTails,
# FG_DEBUG_GEMV_TAILS=1; q / k / v row launches run by the GEMV they wait
# for). Tests with the tails on, the PDL delay build, memcheck, then steps
# with the tails off and on alternating.
#   bash scripts/gpu-s25-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.*' > "$OUT/tails.txt" 2>&1
echo "tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantWorkload*:GpuQuantMoeWorkload*:GpuAttentionEarly.*:GpuGreedyToken*:GpuInputCheck*'
FG_DEBUG_GEMV_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-t timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with tails rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
FG_DEBUG_GEMV_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuGemvTails.Demo*:GpuGemvTails.Tiny*:GpuDemo*:GpuPrefillThenDecode*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 60 compute-sanitizer --tool memcheck $T --gtest_filter='GpuGemvTails.Demo*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2; do
  for w in w-tiny w-moe-12-q4_k w-dense-q4_k w-moe-12 w-dense; do
    stepf $w "FG_DEBUG_GEMV_TAILS=0"
    stepf $w "FG_DEBUG_GEMV_TAILS=1"
  done
done
for w in w-tiny w-moe-12-q4_k; do
  [ "$(left)" -gt 50 ] || break
  FG_DEBUG_GEMV_TAILS=1 timeout 45 fusegraph bench --workload $w --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-$w.txt" 2>&1
  echo "== breakdown $w rc $?"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
