#!/usr/bin/env bash
# The twenty-second session's third GPU call: q8_0 expert launches read by
# whole warps (EmitOptions::gemvDp4aWarpLoadExperts' rule): the DP4A forms
# (against the int8-x reference and to the same bits across the load forms),
# the expert GpuFused cases, the quantised MoE models; W-moe-12 q8_0 steps
# with the rule and without (=0), alternating; W-dense q4_K (call 2 lost it);
# racecheck over the router in one launch.
#   bash scripts/gpu-s22-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-450}
source scripts/gpu-call-lib.sh
timeout 140 $T --gtest_filter='GpuQuantGemv.Q4KDp4aEveryForm:*GpuFused*gated_matmul_id*:*GpuFused*matmul_id_sum_add*:*GpuQuantMoe*' > "$OUT/tests.txt" 2>&1
echo "tests rc $?: $(summ "$OUT/tests.txt")"
grep -E '^\[quant\]' "$OUT/tests.txt"
{
stepf w-moe-12-q8_0 ""
stepf w-moe-12-q8_0 "FG_DEBUG_DP4A_WARP_LOAD_EXPERTS=0"
stepf w-moe-12-q8_0 ""
stepf w-moe-12-q8_0 "FG_DEBUG_DP4A_WARP_LOAD_EXPERTS=0"
stepf w-dense-q4_k ""
stepf w-moe-12-q4_k ""
} 2>&1 | tee "$OUT/steps.txt"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 50 ]; then
  timeout 45 compute-sanitizer --tool racecheck $T --gtest_filter='*GpuFused*rms_norm_matmul_topk_moe_softmax*' \
    > "$OUT/sanitize-racecheck.txt" 2>&1
  echo "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/sanitize-racecheck.txt" | head -2 | tr '\n' ' ') $(summ "$OUT/sanitize-racecheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
