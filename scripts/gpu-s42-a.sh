#!/usr/bin/env bash
# The forty-second session's first call: the GEMV store tails
# (EmitOptions::gemvStoreTails, FG_DEBUG_GEMV_STORE_TAILS=1: each thread that
# stores an element of a plain GEMV's result runs q's rope, k's rope + cache
# write or v's cache write on that value, in registers). Tests (bit identity
# against no tails, the CPU), the usual GPU set with it on, the PDL delay
# build, memcheck, then steps off / on alternating, the angle's cost
# (FG_DEBUG_STORE_TAIL_NO_ANGLE, wrong values) and the drop bound.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s42-a.sh 520  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-520}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.Store*' > "$OUT/tails.txt" 2>&1
echo "store tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantWorkload*:GpuAttentionEarly.*:GpuGreedyToken*:GpuInputCheck*'
FG_DEBUG_GEMV_STORE_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-s timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with store tails rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
FG_DEBUG_GEMV_STORE_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuGemvTails.Store*:GpuDemo*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='GpuGemvTails.Store*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2; do
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=1"
done
stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=1 FG_DEBUG_STORE_TAIL_NO_ANGLE=1"
stepf w-tiny "FG_DEBUG_DROP_OPS=rope,set_rows,fused.rope_set_rows"
for w in w-dense w-moe-12; do
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=1"
done
stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=0"
stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=1"
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
