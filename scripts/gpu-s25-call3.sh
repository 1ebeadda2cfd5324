#!/usr/bin/env bash
# Twenty-fifth session, call 3: GEMV tails side by side (each tail on its own
# tail blocks) with a release ticket and no sleep in the wait; tests, then
# steps with the tails off and on alternating.
#   bash scripts/gpu-s25-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
timeout 90 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.*' > "$OUT/tails.txt" 2>&1
echo "tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt"
{
for r in 1 2; do
  for w in w-tiny w-moe-12-q4_k w-dense-q4_k; do
    stepf $w "FG_DEBUG_GEMV_TAILS=0"
    stepf $w "FG_DEBUG_GEMV_TAILS=1"
  done
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
