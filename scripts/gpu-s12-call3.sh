#!/usr/bin/env bash
# Twelfth session, call 3: the grouped GEMM's defaults (quantised experts on,
# 64-wide k-step, one row's step a thread for one stream) under the GPU tests,
# then W-moe-12 q4_K's 512-token prefill with the quantised unit mapping and
# gate|up's tile height varied (FG_DEBUG_MOE_QROW, FG_DEBUG_MOE_ROWS), and
# f16 at the defaults.
#   bash scripts/gpu-s12-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-300}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
timeout 100 "$T" \
  --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised:GpuGroupedExpert*:GpuPrefillThenDecode*:Types/GpuQuantWorkload*:GpuQuantModel*:-GpuGroupedExpert.WMoeShapes' \
  > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|SKIPPED' "$OUT/tests.txt" | head -8 | tr '\n' ' ')"
FG_DEBUG_MOE_ROWS=64 FG_DEBUG_MOE_QROW=1 timeout 60 "$T" --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised' > "$OUT/tests-rows64.txt" 2>&1
echo "quant grouped, 64 rows + row units, rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests-rows64.txt" | head -4 | tr '\n' ' ')"
run() { # label, env..., then the workload
  local label=$1; shift
  [ $(left) -gt 45 ] || { echo "skipped: $label"; return; }
  echo "== $label"
  env "$@" timeout $(( $(left) - 15 )) fusegraph bench --workload "${W}" --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
  grep -E "prefill_512  |matmul_id" /tmp/p.txt | head -4
}
{
W=w-moe-12-q4_k
run "q4_K defaults" FG_X=1
run "q4_K spread units for both (QROW=0)" FG_DEBUG_MOE_QROW=0
run "q4_K gate|up 64-row tiles (ROWS=64)" FG_DEBUG_MOE_ROWS=64
run "q4_K 64-row tiles, row units for both (ROWS=64 QROW=1)" FG_DEBUG_MOE_ROWS=64 FG_DEBUG_MOE_QROW=1
W=w-moe-12
run "f16 defaults" FG_X=1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
