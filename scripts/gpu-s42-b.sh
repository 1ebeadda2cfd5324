#!/usr/bin/env bash
# The forty-second session's second call: the store tails with the rope
# rotation rounded the same way everywhere (common.cuh fg_rope_first/second:
# bit identity against the row launches), the angle computed before the
# GEMV's wait (FG_DEBUG_STORE_TAIL_EARLY_ANGLE=1), the PDL delay build with
# the tails off (is the demo's eager failure of call 1 theirs?) and on, then
# steps off / on / on + early alternating.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s42-b.sh 540  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.Store*' > "$OUT/tails.txt" 2>&1
echo "store tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt"
FG_DEBUG_GEMV_STORE_TAILS=0 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuDemo*' > "$OUT/delay-off.txt" 2>&1
echo "delay build, tails off rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay-off.txt")"
FG_DEBUG_GEMV_STORE_TAILS=1 FG_DEBUG_STORE_TAIL_EARLY_ANGLE=1 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 90 $T --gtest_brief=1 \
  --gtest_filter='GpuGemvTails.Store*:GpuDemo*' > "$OUT/delay-on.txt" 2>&1
echo "delay build, store tails + early rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay-on.txt")"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantWorkload*:GpuAttentionEarly.*:GpuGreedyToken*:GpuInputCheck*'
FG_DEBUG_GEMV_STORE_TAILS=1 FG_DEBUG_STORE_TAIL_EARLY_ANGLE=1 FG_KERNEL_CACHE=/tmp/fgk-s timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with store tails + early rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='GpuGemvTails.StoreFormEarly*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
E="FG_DEBUG_GEMV_STORE_TAILS=1 FG_DEBUG_STORE_TAIL_EARLY_ANGLE=1"
{
for r in 1 2 3; do
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=1"
  stepf w-tiny "$E"
done
for w in w-dense w-moe-12; do
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=1"
  stepf $w "$E"
done
[ "$(left)" -gt 50 ] && env $E timeout 45 fusegraph bench --workload w-tiny \
  --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-w-tiny.txt" 2>&1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
