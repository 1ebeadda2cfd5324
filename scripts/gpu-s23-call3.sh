#!/usr/bin/env bash
# The twenty-third session's third GPU call: the suites call 2's filter
# missed (parametric instances are named Prefix/Suite.Case) or ran out of
# time for: the traced replay, the quantised workloads (every entry with its
# input check reading the staging and its greedy launch), the router and
# top-k fused cases, every op case.
#   bash scripts/gpu-s23-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
timeout 60 $T --gtest_filter='TraceGpu*' > "$OUT/tests-trace.txt" 2>&1
echo "trace rc $?: $(summ "$OUT/tests-trace.txt")"
timeout 200 $T --gtest_filter='Types/*:Fused/GpuFused.*topk*' > "$OUT/tests-quant.txt" 2>&1
echo "quant + topk rc $?: $(summ "$OUT/tests-quant.txt")"
grep -E '^\[  FAILED' "$OUT/tests-quant.txt" | head
timeout $(( $(left) - 10 )) $T --gtest_filter='Ops/GpuOp.*' > "$OUT/tests-ops.txt" 2>&1
echo "ops rc $?: $(summ "$OUT/tests-ops.txt")"
grep -E '^\[  FAILED' "$OUT/tests-ops.txt" | head
echo "done after $((SECONDS - S)) s"
