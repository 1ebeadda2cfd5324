#!/usr/bin/env bash
# The twenty-first session's first GPU call: fused.matmul_id_sum_add (the
# expert down projection with the MoE sum and the residual add in one DP4A
# launch, default on where the target takes it: q4_K / q8_0 experts at T = 1).
# Its GPU cases against the unfused plan and the reference, the quantised
# whole-model tests (W-moe-12 q4_K's teacher-forced logits run it), memcheck;
# W-moe-12 q4_K and q8_0 steps with it on and off (--disable-fusion), twice;
# the kernel beside matmul_id's down projection; W-moe-12 q4_K's breakdown.
#   bash scripts/gpu-s21-call1.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
F='*GpuFused*matmul_id_sum_add*:*GpuFused*moe_weighted_sum*'
timeout 120 $T --gtest_filter="$F" > "$OUT/tests-fused.txt" 2>&1
echo "fused MoE tests rc $?: $(summ "$OUT/tests-fused.txt")"
timeout 100 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*' > "$OUT/quant-model.txt" 2>&1
echo "quantised model tests rc $?: $(summ "$OUT/quant-model.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='*GpuFused*matmul_id_sum_add*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt") $(summ "$OUT/sanitize-memcheck.txt")"
fi
{
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "" --disable-fusion matmul_id_sum_add
stepf w-moe-12-q8_0 ""
stepf w-moe-12-q8_0 "" --disable-fusion matmul_id_sum_add
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "" --disable-fusion matmul_id_sum_add
} 2>&1 | tee "$OUT/steps.txt"
KERN_MIN_LEFT=120
kern "w-moe down: matmul_id and the fused sum" '--benchmark_filter=^(matmul_id|fused.matmul_id_sum_add)/w-moe/down/(q4_k|q8_0)/T1(/|$)'
if [ "$(left)" -gt 80 ]; then
  timeout $(( $(left) - 10 )) fusegraph bench --workload w-moe-12-q4_k --compare fused,graph --steps 10 \
    --warmup 3 --breakdown > "$OUT/moe-breakdown.txt" 2>&1
  echo "W-moe-12 q4_K breakdown rc $?"
  grep -A40 -i "family" "$OUT/moe-breakdown.txt" | head -40
fi
echo "done after $((SECONDS - S)) s"
