#!/usr/bin/env bash
# Thirty-first session, call 4: the m-tile skip for quantised experts only
# (the rule after call 3), its bit-equality test fixed (one graph: randn
# draws new seeds), then W-moe-12 q4_K's prefill with and without it,
# alternating, and f16 at the default.
#   bash scripts/gpu-s31-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
timeout 120 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert.Skipped*:GpuGroupedExpert.Zero*:GpuGroupedExpert.AllPairs*:GpuQuantGemv.GroupedExpert*:GpuGroupedExpertReplay*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
PRE_MIN_LEFT=40
for round in 1 2; do
  for e in "" "FG_DEBUG_MOE_SKIP_ROWS=0"; do
    pre w-moe-12-q4_k "$e" --steps 5 --warmup 2 --breakdown
    grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  done
done
pre w-moe-12 "" --steps 5 --warmup 2 --breakdown
grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
echo "call done after $((SECONDS - S)) s"
