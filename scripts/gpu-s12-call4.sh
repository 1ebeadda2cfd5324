#!/usr/bin/env bash
# Twelfth session, call 4 (the last ~300 s of device time): the prefill
# matmul's dequantisation with four units a thread (FG_DEBUG_DEQUANT_UNITS=4)
# under its GPU tests, then W-dense q4_K's 512-token prefill with 1 and 4
# (the issue's <= 20 ms; 21.29 in the eleventh session, 6.64 ms of it
# dequantisation). Also the quantised grouped GEMM's test at the new rule
# (64-row gate|up tiles).
#   bash scripts/gpu-s12-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-250}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
FG_DEBUG_DEQUANT_UNITS=4 timeout 60 "$T" \
  --gtest_filter='GpuQuantGemv.PrefillMatmulThroughCublas:GpuQuantGemv.GetRowsDequantises:GpuQuantGemv.GroupedExpertGemmQuantised' \
  > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests.txt" | head -8 | tr '\n' ' ')"
for u in 1 4 1 4; do
  [ $(left) -gt 50 ] || { echo "skipped: units $u"; continue; }
  echo "== w-dense-q4_k prefill 512, FG_DEBUG_DEQUANT_UNITS=$u"
  FG_DEBUG_DEQUANT_UNITS=$u timeout $(( $(left) - 10 )) fusegraph bench --workload w-dense-q4_k --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
  grep -E "prefill_512  |^  (matmul|fused.matmul_add) " /tmp/p.txt | head -5
done 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
