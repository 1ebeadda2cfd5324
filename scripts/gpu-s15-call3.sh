#!/usr/bin/env bash
# The fifteenth session's third GPU call: the final defaults (the rule 1 with
# experts, q4_0 and dense launches above 4 MiB; x shared a block; sums every
# 4 tiles; q6_K), in order as the deadline allows:
# 1. the quantised GPU tests (the tensor-core expert checks now pin
#    FG_DEBUG_GEMV_DP4A=0; the models, workloads, prefill == decode);
# 2. racecheck over the exact DP4A test (shared x, the combine's barriers);
# 3. where a W-dense q4_K step goes (--breakdown), and the W-dense q4_0 step
#    at the defaults (call 2 measured it at =2: 2.79 ms, tensor cores 3.32).
#   bash scripts/gpu-s15-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-430}
source scripts/gpu-call-lib.sh
# Less the tests call 2 passed that the later changes (q4_0 in the rule, 4 MiB)
# do not reach: small dense shapes, DP4A pinned by its env, grouped GEMMs.
timeout 200 "$T" --gtest_filter='GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.Quantised*:GpuQuantGemv.*-GpuQuantGemv.Q4KDp4a*:GpuQuantGemv.DenseEveryTypeAndTokenCount:GpuQuantGemv.GatedWithBiasEveryGlu:GpuQuantGemv.GroupedExpertGemmQuantised:GpuQuantGemv.MatmulAddResidualAndBias' > "$OUT/tests-default.txt" 2>&1
echo "quantised tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-default.txt")"
grep -E '^\[ +(OK|FAILED) ' "$OUT/tests-default.txt" | tr -s ' ' | cut -d' ' -f3,4,5 | tr '\n' ';'; echo
if [ $(left) -gt 100 ]; then
  FG_UNDER_SANITIZER=racecheck timeout $(( $(left) - 95 < 120 ? $(left) - 95 : 120 )) compute-sanitizer --tool racecheck --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4aExact*' > "$OUT/racecheck.txt" 2>&1
  echo "racecheck rc $? after $((SECONDS - S)) s: $(summ "$OUT/racecheck.txt")"
fi
if [ $(left) -gt 80 ]; then
  timeout $(( $(left) - 5 )) fusegraph bench --workload w-dense-q4_k --steps 10 --breakdown > "$OUT/breakdown-q4_k.txt" 2>&1
  echo "breakdown rc $? after $((SECONDS - S)) s"
fi
{ step w-dense-q4_0; } 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
