#!/usr/bin/env bash
# The twenty-first session's second GPU call: fused.rms_norm_matmul_topk_moe
# (the FFN norm, the router GEMV and the routing in one cluster launch,
# default on at one token on sm_90) beside call 1's fused.matmul_id_sum_add.
# Its GPU cases, the topk and MoE cases, whole models (demo, sessions,
# prefill-then-decode, quantised workloads), memcheck and racecheck; W-moe
# steps with each fusion on and off; matmul_id_sum_add's work split swept.
#   bash scripts/gpu-s21-call2.sh DEADLINE_S  (carry [".gpu"]; bundle with --models)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
F='*GpuFused*rms_norm_matmul_topk*:*GpuFused*topk_moe*:*GpuFused*matmul_id_sum_add*:*GpuFused*gated_matmul_id*'
timeout 100 $T --gtest_filter="$F" > "$OUT/tests-fused.txt" 2>&1
echo "fused MoE tests rc $?: $(summ "$OUT/tests-fused.txt")"
timeout 150 $T --gtest_filter='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantModel*:*Quant*Workload*' > "$OUT/tests-models.txt" 2>&1
echo "model tests rc $?: $(summ "$OUT/tests-models.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 60 compute-sanitizer --tool memcheck $T --gtest_filter='*GpuFused*rms_norm_matmul_topk*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
R=rms_norm_matmul_topk_moe
{
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "" --disable-fusion $R
stepf w-moe-12 ""
stepf w-moe-12 "" --disable-fusion $R
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "" --disable-fusion $R,matmul_id_sum_add
stepf w-moe-12-q8_0 ""
stepf w-moe-12-q8_0 "" --disable-fusion $R
} 2>&1 | tee "$OUT/steps.txt"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 50 ]; then
  timeout 40 compute-sanitizer --tool racecheck $T --gtest_filter='*GpuFused*rms_norm_matmul_topk_moe_softmax*' \
    > "$OUT/sanitize-racecheck.txt" 2>&1
  echo "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/sanitize-racecheck.txt" | head -2 | tr '\n' ' ')"
fi
KERN_MIN_LEFT=100
S1='--benchmark_filter=^fused.matmul_id_sum_add/w-moe/down/(q4_k|q8_0)/T1(/|$)'
kern "sum_add default" "$S1"
kern "sum_add 2 ahead" --gemv-dp4a-ahead=2 "$S1"
kern "sum_add 1 row a warp" --gemv-dp4a-unroll=1 "$S1"
kern "sum_add 4 rows a warp" --gemv-dp4a-unroll=4 "$S1"
kern "sum_add 24 warps an SM" --gemv-dp4a-warps=24 "$S1"
if [ "$(left)" -gt 70 ]; then
  timeout $(( $(left) - 10 )) fusegraph bench --workload w-moe-12-q4_k --compare fused,graph --steps 10 \
    --warmup 3 --breakdown > "$OUT/moe-breakdown.txt" 2>&1
  echo "W-moe-12 q4_K breakdown rc $?"
  grep -A16 "family " "$OUT/moe-breakdown.txt" | head -16
fi
echo "done after $((SECONDS - S)) s"
