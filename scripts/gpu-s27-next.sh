#!/usr/bin/env bash
# Written at the end of the twenty-sixth session for the next one's first GPU
# call (its device time was spent): fused.matmul_id_sum_add with f16 / bf16 /
# f32 experts (EmitOptions::moeSumFloat, FG_DEBUG_MOE_SUM_FLOAT=1,
# kernels/moe_sum.cuh; compiled with NVRTC, never run). Its GPU test against
# the CPU, the GPU sets it touches (the demo's experts are f32), the PDL delay
# build, memcheck, then steps off / on alternating on W-moe-12 f16 and bf16
# and W-moe-48 (whose weights' set-up needs more than 75 s a run).
#   bash scripts/gpu-s27-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 120 $T --gtest_brief=1 --gtest_filter='GpuMoeSumFloat.*' > "$OUT/moesum.txt" 2>&1
echo "moe sum float test rc $? at $((SECONDS - S)) s: $(summ "$OUT/moesum.txt")"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantMoeWorkload*:GpuRoutingHeads.*:GpuFused*matmul_id_sum_add*'
FG_DEBUG_MOE_SUM_FLOAT=1 FG_KERNEL_CACHE=/tmp/fgk-m timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with it rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
FG_DEBUG_MOE_SUM_FLOAT=1 FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuMoeSumFloat.*:GpuDemo*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 90 compute-sanitizer --tool memcheck $T --gtest_filter='GpuMoeSumFloat.*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2; do
  for w in w-moe-12 w-moe-12-bf16; do
    stepf $w "FG_DEBUG_MOE_SUM_FLOAT=0"
    stepf $w "FG_DEBUG_MOE_SUM_FLOAT=1"
  done
done
for v in 0 1; do
  [ "$(left)" -gt 160 ] || break
  FG_DEBUG_MOE_SUM_FLOAT=$v timeout 150 fusegraph bench --workload w-moe-48 --compare fused,graph \
    --steps 20 > /tmp/step48.txt 2>&1
  echo "== w-moe-48 FG_DEBUG_MOE_SUM_FLOAT=$v (rc $?): $(grep -E '^graph' /tmp/step48.txt | awk '{print $1, $2}')"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
