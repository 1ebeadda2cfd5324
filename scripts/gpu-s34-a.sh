#!/usr/bin/env bash
# Thirty-fourth session, call 1: the thirty-third session's last commit (one
# moeStore epilogue for both grouped GEMMs) under the grouped GEMM's tests;
# the flash prefill's new forms (warpgroup MMAs, three stages, K and V
# waited for apart, 8 warps, 3 blocks an SM) under their tests and timed in the kernel bench;
# Nsight Compute on the flash prefill at 2048 tokens and on decode at KV
# 8192; the W-dense 2048-token prefill, default against the fastest form.
#   bash scripts/gpu-s34-a.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 150 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert*:GpuQuantGemv.GroupedExpert*' > "$OUT/gtest.txt" 2>&1
echo "== grouped GEMM tests (rc $?): $(summ "$OUT/gtest.txt")"
timeout 150 fusegraph_gpu_tests --gtest_filter='*GpuFlashPrefill*:*GpuAttentionPrefill*' > "$OUT/gtest-flash.txt" 2>&1
echo "== flash tests (rc $?): $(summ "$OUT/gtest-flash.txt")"
grep -E "^\[  (FAILED|     OK) \].*StagesSplitWait" "$OUT/gtest-flash.txt" | head -3
FORMS=("" "FG_DEBUG_FLASH_WGMMA=1" "FG_DEBUG_FLASH_WGMMA=1 FG_DEBUG_FLASH_STAGES=3" "FG_DEBUG_FLASH_WGMMA=1 FG_DEBUG_FLASH_SPLIT_WAIT=1" "FG_DEBUG_FLASH_WGMMA=1 FG_DEBUG_FLASH_STAGES=3 FG_DEBUG_FLASH_WG_DEFER=1" "FG_DEBUG_FLASH_STAGES=3" "FG_DEBUG_FLASH_SPLIT_WAIT=1" "FG_DEBUG_FLASH_WARPS=8" "FG_DEBUG_FLASH_MIN_BLOCKS=3" "")
best=""; bestus=1e9
for f in "${FORMS[@]}"; do
  [ "$(left)" -gt 200 ] || break
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='attention/w-(dense|moe)/prefill' --table /tmp/a.md > /tmp/a.txt 2>&1
  rc=$?
  r=$(grep -E "^\| attention" /tmp/a.md | awk -F'|' '{print $3"/T"$7": "$8}' | tr -s ' ' | tr '\n' ';')
  echo "== ${f:-default} (rc $rc): $r"
  us=$(grep -E "^\| attention" /tmp/a.md | awk -F'|' '$3 ~ /w-dense/ && $7 ~ /2048/ {print $8}' | tr -d ' ' | tail -1)
  if [ -n "$f" ] && python3 -c "import sys; sys.exit(0 if float('$us') < float('$bestus') else 1)" 2>/dev/null; then best="$f"; bestus="$us"; fi
done
echo "fastest form: ${best:-none} ($bestus)"
PRE=2048 PRE_TIMEOUT=120 pre w-dense "" --steps 3 --warmup 1 --ctx 4096 --breakdown
grep -E "^  (fused.attention_convert|attention) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
if [ -n "$best" ]; then
  PRE=2048 PRE_TIMEOUT=120 pre w-dense "$best" --steps 3 --warmup 1 --ctx 4096 --breakdown
  grep -E "^  (fused.attention_convert|attention) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  PRE=2048 PRE_TIMEOUT=100 pre w-dense "" --steps 3 --warmup 1 --ctx 4096
  PRE=2048 PRE_TIMEOUT=100 pre w-dense "$best" --steps 3 --warmup 1 --ctx 4096
fi
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis"
if [ "$(left)" -gt 220 ]; then
  timeout 100 ncu --clock-control none -k regex:attention -c 1 $SECT fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='attention/w-dense/prefill/f16/T2048' > "$OUT/ncu-flash.txt" 2>&1
  echo "== ncu flash 2048 (rc $?)"
  grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  |Stall|No Eligible|Eligible Warps|Shared Memory Configuration Size|L1/TEX Hit|L2 Hit|DRAM Throughput|Pipe|Bank" "$OUT/ncu-flash.txt" | tr -s ' ' | head -40
fi
if [ "$(left)" -gt 240 ]; then
  FG_DEBUG_FLASH_WGMMA=1 timeout 80 ncu --clock-control none -k regex:attention -c 1 $SECT fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='attention/w-dense/prefill/f16/T2048' > "$OUT/ncu-flash-wg.txt" 2>&1
  echo "== ncu flash 2048 wgmma (rc $?)"
  grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  |No Eligible|Eligible Warps" "$OUT/ncu-flash-wg.txt" | tr -s ' ' | head -12
fi
if [ "$(left)" -gt 200 ]; then
  timeout 80 ncu --clock-control none -k regex:attention -c 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='attention/w-dense/kv8192/f16/T1(/|$)' > "$OUT/ncu-dec8k.txt" 2>&1
  echo "== ncu decode kv8192 (rc $?)"
  grep -E "Duration|Grid Size|Block Size|Registers Per|Achieved Occupancy|DRAM Throughput|Stall|Waves Per SM|Cluster" "$OUT/ncu-dec8k.txt" | tr -s ' ' | head -30
fi
echo "call done after $((SECONDS - S)) s"
