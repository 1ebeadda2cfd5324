#!/usr/bin/env bash
# The forty-second session's third call: the store tails with the cache row
# read ahead too (FG_DEBUG_STORE_TAIL_EARLY=1: angle and cache row before the
# GEMV's wait). Tests, the PDL delay build twice (call 1 saw the demo's eager
# teacher-forced run fail once under it), the usual set, memcheck, then steps
# off / on / on + early alternating.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s42-c.sh 540  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.Store*' > "$OUT/tails.txt" 2>&1
echo "store tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt"
E="FG_DEBUG_GEMV_STORE_TAILS=1 FG_DEBUG_STORE_TAIL_EARLY=1"
for k in 1 2; do
  env $E FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 90 $T --gtest_brief=1 \
    --gtest_filter='GpuGemvTails.Store*:GpuDemo*' > "$OUT/delay-$k.txt" 2>&1
  echo "delay build $k, store tails + early rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay-$k.txt")"
done
FG_DEBUG_GEMV_STORE_TAILS=1 FG_KERNEL_CACHE=/tmp/fgk-delay0 FG_DEBUG_PDL_DELAY_NS=20000 timeout 90 $T --gtest_brief=1 \
  --gtest_filter='GpuDemo*' > "$OUT/delay-3.txt" 2>&1
echo "delay build, store tails (call 1's form) rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay-3.txt")"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantWorkload*:GpuAttentionEarly.*:GpuGreedyToken*:GpuInputCheck*:GpuGemvTails.*'
env $E FG_KERNEL_CACHE=/tmp/fgk-s timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with store tails + early rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='GpuGemvTails.StoreFormEarly*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2 3; do
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=1"
  stepf w-tiny "$E"
done
for w in w-dense w-moe-12 w-dense w-moe-12; do
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf $w "$E"
done
stepf w-tiny "FG_DEBUG_DROP_OPS=rope,set_rows,fused.rope_set_rows"
[ "$(left)" -gt 50 ] && env $E timeout 45 fusegraph bench --workload w-tiny \
  --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-w-tiny.txt" 2>&1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
