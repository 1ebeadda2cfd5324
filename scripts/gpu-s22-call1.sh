#!/usr/bin/env bash
# The twenty-second session's first GPU call: the reference that quantises x
# as the DP4A launches do (ExecOptions::cpuActQuant: GpuQuantGemv's DP4A
# forms, GpuFused's DP4A cases and the quantised models against it) and the
# router in one launch over the whole GPU (fused.rms_norm_matmul_topk_moe,
# opt-in: its cases, memcheck, W-moe-12 steps with it on and off).
#   bash scripts/gpu-s22-call1.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
F='*GpuFused*rms_norm_matmul_topk*:*GpuFused*topk_moe*:*GpuFused*matmul_id_sum_add*:*GpuFused*gated_matmul_id*:*GpuFused*matmul_multi*'
timeout 110 $T --gtest_filter="$F" > "$OUT/tests-fused.txt" 2>&1
echo "fused tests rc $?: $(summ "$OUT/tests-fused.txt")"
R=rms_norm_matmul_topk_moe
{
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "" --enable-fusion $R
stepf w-moe-12 ""
stepf w-moe-12 "" --enable-fusion $R
stepf w-moe-12-q4_k "" --enable-fusion $R
stepf w-moe-12-q4_k ""
} 2>&1 | tee "$OUT/steps.txt"
timeout 150 $T --gtest_filter='*GpuQuantMoe*:*GpuQuantWorkload*' > "$OUT/tests-models.txt" 2>&1
echo "model tests rc $?: $(summ "$OUT/tests-models.txt")"
grep -E '^\[quant\]' "$OUT/tests-models.txt"
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) - 50 > 140 ? 140 : $(left) - 50 )) $T --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/tests-dp4a.txt" 2>&1
  echo "DP4A tests rc $?: $(summ "$OUT/tests-dp4a.txt")"
fi
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 45 ]; then
  timeout 40 compute-sanitizer --tool memcheck $T --gtest_filter='*GpuFused*rms_norm_matmul_topk*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
