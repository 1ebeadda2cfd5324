#!/usr/bin/env bash
# The sixteenth session's second GPU call (issues 13 and 14):
# - q, k and v as one launch on DP4A (--enable-fusion matmul_multi: with
#   the norm prologue, fused.rms_norm_matmul_multi, gemvDp4aMulti);
# - q4_K weights through a ring of S stages in shared memory
#   (FG_DEBUG_DP4A_STAGES=S / --gemv-dp4a-stages=S, cp.async, new).
# 1. the DP4A tests (the merged segments and the staged ring among them:
#    the same bits) and the merged ops' fused GPU cases;
# 2. q4_K kernels at T = 1: defaults, 3 and 4 stages;
# 3. steps beside the defaults in this call, in order of interest.
#   bash scripts/gpu-s16-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 120 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*:*GpuFused*matmul_multi*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
F='--benchmark_filter=^(matmul|fused.gated_matmul)(_id)?/w-(dense|moe)/.*/q4_k/T1(/|$)'
{
kern "defaults" "$F"
kern "3 stages" --gemv-dp4a-stages=3 "$F"
kern "4 stages" --gemv-dp4a-stages=4 "$F"
} 2>&1 | tee "$OUT/kernels.txt"
{
stepf w-dense-q4_k ""
stepf w-dense-q4_k "" --enable-fusion matmul_multi
stepf w-dense-q4_k "FG_DEBUG_DP4A_STAGES=4"
stepf w-dense-q4_k "FG_DEBUG_DP4A_STAGES=4" --enable-fusion matmul_multi
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_DP4A_STAGES=4" --enable-fusion matmul_multi
stepf w-dense-q8_0 ""
stepf w-dense-q8_0 "" --enable-fusion matmul_multi
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
