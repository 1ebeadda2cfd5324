#!/usr/bin/env bash
# The seventeenth session's third GPU call: two tiles ahead for q4_K as the
# default (EmitOptions::gemvDp4aAhead's rule), confirmed against one ahead
# (FG_DEBUG_DP4A_AHEAD=1) in alternating runs; the quantised whole-model
# tests and the DP4A tests at the new default.
#   bash scripts/gpu-s17-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.Quantised*:GpuQuantGemv.Q4KDp4a*:*GpuFused*matmul_multi*' \
  > "$OUT/quant-tests.txt" 2>&1
echo "quant tests rc $?: $(summ "$OUT/quant-tests.txt")"
{
for i in 1 2; do
  stepf w-dense-q4_k ""
  stepf w-dense-q4_k "FG_DEBUG_DP4A_AHEAD=1"
done
stepf w-dense-q4_k_m ""
stepf w-dense-q4_k_m "FG_DEBUG_DP4A_AHEAD=1"
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_DP4A_AHEAD=1"
stepf w-dense-q4_k ""
stepf w-dense-q4_k "FG_DEBUG_DP4A_AHEAD=1"
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
