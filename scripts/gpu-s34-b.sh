#!/usr/bin/env bash
# Thirty-fourth session, the short call (gpu-s34-a.sh did not get a machine):
# the moeStore commit's grouped GEMM tests, the flash forms' test, the prefill
# attention rows in four forms, W-dense's 2048-token prefill default / wgmma.
#   bash scripts/gpu-s34-b.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
timeout 60 fusegraph_gpu_tests --gtest_filter='GpuFlashPrefillOptions.StagesSplitWaitAndWarps:GpuFlashPrefillReplay.*' > "$OUT/gtest-flash.txt" 2>&1
echo "== flash forms test (rc $?): $(summ "$OUT/gtest-flash.txt")"
grep -E "Failure|Which is|FG_DEBUG|error|max" "$OUT/gtest-flash.txt" | head -12
for f in "" "FG_DEBUG_FLASH_WGMMA=1" "FG_DEBUG_FLASH_WGMMA=1 FG_DEBUG_FLASH_STAGES=3 FG_DEBUG_FLASH_WG_DEFER=1" "FG_DEBUG_FLASH_STAGES=3" "FG_DEBUG_FLASH_SPLIT_WAIT=1"; do
  [ "$(left)" -gt 60 ] || break
  env $f timeout 45 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='attention/w-(dense|moe)/prefill' --table /tmp/a.md > /tmp/a.txt 2>&1
  echo "== ${f:-default} (rc $?): $(grep -E "^\| attention" /tmp/a.md | awk -F'|' '{print $3"/T"$7": "$8}' | tr -s ' ' | tr '\n' ';')"
done
if [ "$(left)" -gt 150 ]; then
  timeout 100 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert*:GpuQuantGemv.GroupedExpert*' > "$OUT/gtest.txt" 2>&1
  echo "== grouped GEMM tests (rc $?): $(summ "$OUT/gtest.txt")"
fi
PRE=2048 PRE_TIMEOUT=70 PRE_MIN_LEFT=70 pre w-dense "" --steps 3 --warmup 1 --ctx 4096
PRE=2048 PRE_TIMEOUT=70 PRE_MIN_LEFT=70 pre w-dense "FG_DEBUG_FLASH_WGMMA=1" --steps 3 --warmup 1 --ctx 4096
echo "call done after $((SECONDS - S)) s"
