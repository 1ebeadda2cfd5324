#!/usr/bin/env bash
# Thirty-fourth session, call 1: the thirty-third session's last commit (one
# moeStore epilogue for both grouped GEMMs) under the grouped GEMM's tests,
# then where the attention kernels' time goes — the flash prefill at 2048
# tokens and decode at KV 8192 / 32768 (Nsight Compute: stalls, pipes,
# issue) — and the W-dense 2048-token prefill as the baseline.
#   bash scripts/gpu-s34-a.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 150 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert*:GpuQuantGemv.GroupedExpert*' > "$OUT/gtest.txt" 2>&1
echo "== grouped GEMM tests (rc $?): $(summ "$OUT/gtest.txt")"
echo "== attention kernels"
timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='attention/w-(dense|moe)/(prefill|kv8192|kv32768)' --table /tmp/a.md > /tmp/a.txt 2>&1; echo "rc $?"
cat /tmp/a.md >> "$OUT/kern-full.txt"
grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,5,6,7,8,11
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis"
if [ "$(left)" -gt 200 ]; then
  timeout 120 ncu --clock-control none -k regex:attention -c 1 $SECT fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='attention/w-dense/prefill/f16/T2048' > "$OUT/ncu-flash.txt" 2>&1
  echo "== ncu flash 2048 (rc $?)"
  grep -E "Duration|Executed Ipc|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  |Stall|One or More|No Eligible|Active Warps Per|Eligible Warps|Block Limit|Shared Memory Configuration Size|L1/TEX Hit|L2 Hit|DRAM Throughput|Memory Throughput" "$OUT/ncu-flash.txt" | tr -s ' ' | head -60
fi
if [ "$(left)" -gt 200 ]; then
  timeout 100 ncu --clock-control none -k regex:attention -c 2 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='attention/w-dense/kv8192/f16/T1$' > "$OUT/ncu-dec8k.txt" 2>&1
  echo "== ncu decode kv8192 (rc $?)"
  grep -E "^  [a-z_]+.*\(|Duration|Grid Size|Block Size|Registers Per|Achieved Occupancy|DRAM Throughput|Stall|Waves Per SM|Cluster" "$OUT/ncu-dec8k.txt" | tr -s ' ' | head -40
fi
PRE=2048 PRE_TIMEOUT=150 pre w-dense "" --steps 3 --warmup 1 --ctx 4096 --breakdown
grep -E "^  (fused.attention_convert|attention|matmul|fused)" /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
PRE=512 pre w-dense "" --steps 5 --warmup 2
echo "call done after $((SECONDS - S)) s"
