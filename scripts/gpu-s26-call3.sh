#!/usr/bin/env bash
# Twenty-sixth session, call 3: the routing heads at the defaults (on where
# the expert GEMV's blocks fit the GPU at half occupancy). The GPU tests that
# touch MoE, quantised and decoder paths at the new defaults, then steps with
# the heads off / on alternating on the quantised MoE workloads, the other
# workloads once at the defaults (the issues' figures), and W-moe-12 q4_K's
# breakdown.
#   bash scripts/gpu-s26-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-480}
source scripts/gpu-call-lib.sh
F='GpuRoutingHeads.*:GpuQuant*:GpuFused*:GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuGreedyToken*:GpuInputCheck*:GpuGroupedExpert*'
timeout 200 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests at the defaults rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
grep -E '\[heads\]' "$OUT/tests.txt"
{
for r in 1 2; do
  for w in w-moe-12-q4_k w-moe-48-q4_k w-moe-12-q8_0; do
    stepf $w "FG_DEBUG_ROUTING_HEADS=0"
    stepf $w "FG_DEBUG_ROUTING_HEADS=1"
  done
done
for w in w-tiny w-dense w-dense-q4_k w-moe-12; do
  stepf $w ""
done
[ "$(left)" -gt 90 ] && timeout 80 fusegraph bench --workload w-moe-12-q4_k \
  --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-moe-heads.txt" 2>&1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
