#!/usr/bin/env bash
# Twenty-sixth session, call 4 (short: the budget's end): more pairs of
# W-moe-12 q4_K steps with the routing heads off / on (call 3's tests ran past
# their limit and W-moe-48's weight set-up past the step's), then the other
# workloads once at the defaults for the issues' figures.
#   bash scripts/gpu-s26-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-230}
source scripts/gpu-call-lib.sh
timeout 60 $T --gtest_brief=1 --gtest_filter='GpuRoutingHeads.*' > "$OUT/heads.txt" 2>&1
echo "heads test rc $? at $((SECONDS - S)) s: $(summ "$OUT/heads.txt")"
{
for r in 1 2 3; do
  stepf w-moe-12-q4_k "FG_DEBUG_ROUTING_HEADS=1"
  stepf w-moe-12-q4_k "FG_DEBUG_ROUTING_HEADS=0"
done
for w in w-tiny w-dense w-dense-q4_k w-moe-12; do
  stepf $w ""
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
