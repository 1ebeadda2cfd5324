#!/usr/bin/env bash
# Twelfth session, call 2: the grouped expert GEMM's 64-wide k-step
# (FG_DEBUG_MOE_KT=64), x as one f16 and one-step-per-thread units for
# quantised experts, float4 x loads.
# 1. GPU tests at KT 32 and 64 (quantised grouped GEMM, 16-bit grouped GEMM,
#    prefill-then-decode, quantised workloads);
# 2. W-moe-12 f16 and q4_K (grouped quant on) 512-token prefill at KT 32 / 64,
#    twice each, interleaved, with breakdowns; q8_0 once.
#   bash scripts/gpu-s12-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
for kt in 64 32; do
  FG_DEBUG_MOE_KT=$kt FG_DEBUG_GROUPED_QUANT=1 timeout 150 "$T" \
    --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised:GpuGroupedExpert*:GpuPrefillThenDecode*:Types/GpuQuantWorkload*:-GpuGroupedExpert.WMoeShapes' \
    > "$OUT/tests-kt$kt.txt" 2>&1
  echo "tests KT=$kt rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests-kt$kt.txt" | head -8 | tr '\n' ' ')"
done
FG_DEBUG_MOE_KT=64 timeout 120 "$T" --gtest_filter='GpuGroupedExpert.WMoeShapes' > "$OUT/tests-wmoe.txt" 2>&1
echo "WMoeShapes KT=64 rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests-wmoe.txt" | head -4 | tr '\n' ' ')"
FG_UNDER_SANITIZER=memcheck FG_DEBUG_MOE_KT=64 timeout 100 compute-sanitizer --tool memcheck --print-limit 5 \
  "$T" --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised:GpuGroupedExpert.ZeroOne*' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|PASSED|FAILED  \]' "$OUT/memcheck.txt" | tr '\n' ' ')"
{
for round in 1 2; do
  for w in w-moe-12 w-moe-12-q4_k; do
    for kt in 32 64; do
      [ $(left) -gt 40 ] || break 3
      echo "== round $round $w prefill 512 KT=$kt"
      FG_DEBUG_MOE_KT=$kt FG_DEBUG_GROUPED_QUANT=1 timeout $(( $(left) - 20 )) fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
      grep -E "prefill_512  |matmul_id" /tmp/p.txt | head -4
    done
  done
done
for kt in 32 64; do
  [ $(left) -gt 40 ] || break
  echo "== w-moe-12-q8_0 prefill 512 KT=$kt"
  FG_DEBUG_MOE_KT=$kt FG_DEBUG_GROUPED_QUANT=1 timeout $(( $(left) - 20 )) fusegraph bench --workload w-moe-12-q8_0 --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
  grep -E "prefill_512  |matmul_id" /tmp/p.txt | head -4
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
