#!/usr/bin/env bash
# Thirty-third session (no machine was lent: for the next session's first
# call). Everything written since the thirty-second session's last call:
#   1. tests: device-made quantised blocks against the host's, the grouped
#      expert GEMM's forms (f16 x, and q4_K on integer tensor cores:
#      GpuGroupedExpert.Int8AgainstTheReference), the quantised workloads
#      with the device-made weights
#   2. W-moe-12 q4_K 512-token prefill: default, FG_DEBUG_MOE_INT8=1,
#      FG_DEBUG_MOE_HALF_X=1 (breakdowns); W-moe-12 f16 prefill
#   3. the prefill expert GEMMs alone, q4_K, default against int8
#   4. memcheck / racecheck over the int8 test; decode steps
#   bash scripts/gpu-s33-a.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
# Tests with host-made weights (GpuWeightInit turns the device quantiser on
# itself), so a fault of the device quantiser cannot pass for the int8 GEMM's.
timeout 200 fusegraph_gpu_tests --gtest_filter='GpuWeightInit.*:GpuGroupedExpert*:GpuQuantGemv.GroupedExpertGemmQuantised:GpuPrefillThenDecode.Quantised*:Types/GpuQuantMoeWorkload.*/q4_k' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[       OK|FAILED  \]" "$OUT/gtest.txt" | awk '{print $NF, $(NF-2)}' | tr '\n' ' ' | cut -c1-900; echo
# The quantised workloads with their prefill experts on integer tensor cores
# (teacher-forced against the reference; prefill-then-decode).
FG_DEBUG_MOE_INT8=1 timeout 120 fusegraph_gpu_tests --gtest_filter='GpuPrefillThenDecode.Quantised*:Types/GpuQuantMoeWorkload.*' > "$OUT/gtest-int8.txt" 2>&1
echo "== workload tests, int8 experts (rc $?): $(summ "$OUT/gtest-int8.txt")"
export FG_DEBUG_DEVICE_QUANT_INIT=1 # the host takes >100 s to make W-moe-12 q4_K's weights
t0=$SECONDS
pre w-moe-12-q4_k "" --steps 5 --warmup 2 --breakdown
echo "   ($((SECONDS - t0)) s) $(grep -E '^fusegraph: loading' /tmp/pre.txt)"
grep -E "^  (fused.gated_matmul_id|matmul_id|attention|matmul) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
pre w-moe-12-q4_k "FG_DEBUG_MOE_INT8=1" --steps 5 --warmup 2 --breakdown
grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
pre w-moe-12-q4_k "FG_DEBUG_MOE_HALF_X=1" --steps 5 --warmup 2 --breakdown
grep -E "^  (fused.gated_matmul_id|matmul_id|convert) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
pre w-moe-12-q4_k "FG_DEBUG_MOE_INT8=1" --steps 5 --warmup 2
pre w-moe-12-q4_k "" --steps 5 --warmup 2
for e in "" "FG_DEBUG_MOE_INT8=1"; do
  [ "$(left)" -gt 130 ] || break
  echo "== prefill expert GEMMs, q4_K, q5_K, q6_K, q4_0, ${e:-default}"
  env $e timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='_id/w-moe/.*/q(4_k|5_k|6_k|4_0)/T512' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  cat /tmp/k.txt >> "$OUT/kern-full.txt"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,5,6,8,11
done
if [ "$(left)" -gt 200 ]; then
  echo "== the int8 down GEMM at 128 threads (two n8 tiles a warp: x's shared loads shared by two mmas)"
  FG_DEBUG_MOE_INT8=1 FG_DEBUG_MOE_THREADS=128 timeout 60 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='_id/w-moe/.*/q4_k/T512' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,5,6,8,11
fi
if [ "$(left)" -gt 200 ]; then
  # Nsight Compute on the int8 gate|up routing (x quantised) and GEMM launches:
  # instructions, issue, pipes, stalls.
  FG_DEBUG_MOE_INT8=1 timeout 120 ncu --clock-control none -k regex:gated_matmul_id -c 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='fused.gated_matmul_id/w-moe/gate_up/q4_k/T512' > "$OUT/ncu-int8.txt" 2>&1
  echo "== ncu int8 gate|up (rc $?): $(grep -E 'Duration|Executed Ipc Active|Registers Per|Achieved Occupancy|Executed Instructions  ' "$OUT/ncu-int8.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-600)"
fi
if [ "$(left)" -gt 170 ]; then
  # Every kernel's tail delayed 20 µs after its programmatic trigger: a launch
  # that read its inputs before its wait would read them unwritten.
  FG_DEBUG_DEVICE_QUANT_INIT=0 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 100 $T --gtest_brief=1 --gtest_filter='GpuGroupedExpert.Int8*:GpuGroupedExpert.ZeroOneAndManyPairsPerExpert' > "$OUT/pdl-delay.txt" 2>&1
  echo "== PDL delay build, int8 (rc $?): $(summ "$OUT/pdl-delay.txt")"
fi
if [ "$(left)" -gt 150 ]; then
  FG_DEBUG_DEVICE_QUANT_INIT=0 timeout 120 compute-sanitizer --tool memcheck fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert.Int8*' > "$OUT/memcheck.txt" 2>&1
  echo "== memcheck int8 (rc $?): $(summ "$OUT/memcheck.txt")"
fi
if [ "$(left)" -gt 120 ]; then
  FG_DEBUG_DEVICE_QUANT_INIT=0 timeout 100 compute-sanitizer --tool racecheck fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert.Int8*' > "$OUT/racecheck.txt" 2>&1
  echo "== racecheck int8 (rc $?): $(summ "$OUT/racecheck.txt")"
fi
pre w-moe-12 "" --steps 5 --warmup 2 --breakdown
grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
STEP_TIMEOUT=90 stepf w-moe-12-q4_k ""
STEP_TIMEOUT=90 stepf w-dense-q4_k ""
echo "call done after $((SECONDS - S)) s"
