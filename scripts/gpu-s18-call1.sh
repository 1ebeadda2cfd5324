#!/usr/bin/env bash
# For the eighteenth session's first GPU call (written in the seventeenth,
# after its last call): two DP4A forms NVRTC-compiled only so far, the norm
# prologue with the rstd deferred to the stores
# (FG_DEBUG_DP4A_NORM_DEFERRED=1) and each row's bias and residual loaded
# when its tile starts (FG_DEBUG_GEMV_EARLY_EXTRAS=1, the same bits; every
# GEMV form, so f16 W-dense too):
# - the DP4A tests (the deferred form against the CPU reference and to the
#   same bits across x's sharing and the combine) and the whole-model
#   quantised tests with it;
# - steps: the merged q/k/v with the deferred norm (W-dense q4_K's default
#   plan, 9 launches a layer), then with every norm prologue
#   (FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0: the FFN norm into gate|up, 8 a
#   layer; 2.3 us a layer slower than its own launch in the seventeenth
#   session's call 1, before deferring), then with q's rope in the attention
#   too (7 a layer), each beside the defaults in this call.
#   bash scripts/gpu-s18-call1.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 120 $T --gtest_filter='GpuQuantGemv.Q4KDp4a*:*GpuFused*matmul_multi*' > "$OUT/dp4a-tests.txt" 2>&1
echo "dp4a tests rc $?: $(summ "$OUT/dp4a-tests.txt")"
FG_DEBUG_GEMV_EARLY_EXTRAS=1 timeout 100 $T --gtest_filter='*GpuFused*matmul_add*:*GpuFused*gated_matmul*' \
  > "$OUT/fused-early-extras.txt" 2>&1
echo "fused GEMV tests, early extras (every GEMV form), rc $?: $(summ "$OUT/fused-early-extras.txt")"
FG_DEBUG_DP4A_NORM_DEFERRED=1 FG_DEBUG_GEMV_EARLY_EXTRAS=1 timeout 150 $T \
  --gtest_filter='GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.Quantised*' > "$OUT/quant-model-deferred.txt" 2>&1
echo "quant model tests, deferred norm and early extras, rc $?: $(summ "$OUT/quant-model-deferred.txt")"
{
w=w-dense-q4_k
stepf $w ""
stepf $w "FG_DEBUG_GEMV_EARLY_EXTRAS=1"
stepf $w "FG_DEBUG_DP4A_NORM_DEFERRED=1"
stepf $w "FG_DEBUG_DP4A_NORM_DEFERRED=1 FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0"
stepf $w "FG_DEBUG_DP4A_NORM_DEFERRED=1 FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0" --enable-fusion rope_attention
stepf $w ""
stepf w-dense ""
stepf w-dense "FG_DEBUG_GEMV_EARLY_EXTRAS=1"
w=w-moe-12-q4_k
stepf $w ""
stepf $w "FG_DEBUG_DP4A_NORM_DEFERRED=1 FG_DEBUG_GEMV_EARLY_EXTRAS=1"
stepf $w "FG_DEBUG_DP4A_NORM_DEFERRED=1 FG_DEBUG_GEMV_EARLY_EXTRAS=1 FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0"
stepf w-dense-q6_k "" # issue 14's q6_K target (<= 1.8 ms), not timed since q6_K went to DP4A
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
