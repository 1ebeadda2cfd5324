#!/usr/bin/env bash
# Superseded by gpu-s33-a.sh (which runs all of this and the int8 form).
# Thirty-second session, call 3 (not run: no machine was lent after call 2;
# for the next session): after the permute scales and the ldmatrix
# form became the only forms, and quantised weights are initialised on the
# device (init module fg_init_<type>, ir/QuantizeBlock.h).
#   1. device-made blocks against the host's, the grouped-expert and
#      quantised-workload GPU tests
#   2. W-moe-12 q4_K: 512-token prefill (breakdown) as it is and with x in
#      f16 before the grouped GEMMs (FG_DEBUG_MOE_HALF_X=1), decode; set-up
#   3. W-moe-12 f16 prefill, W-dense q4_K decode; the prefill expert GEMMs
#      alone with f32 x, f16 x, and f16 x by 16-byte loads; decode q4_K GEMVs
#   bash scripts/gpu-s32-b.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
FG_DEBUG_DEVICE_QUANT_INIT=1 timeout 200 fusegraph_gpu_tests --gtest_filter='GpuWeightInit.*:GpuGroupedExpert.*:GpuQuantGemv.GroupedExpertGemmQuantised:GpuPrefillThenDecode.Quantised*:Types/GpuQuantMoeWorkload.*/q4_k' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[       OK|FAILED  \]" "$OUT/gtest.txt" | awk '{print $NF, $(NF-2)}' | tr '\n' ' ' | cut -c1-900; echo
t0=$SECONDS
pre w-moe-12-q4_k "FG_DEBUG_DEVICE_QUANT_INIT=1" --steps 5 --warmup 2 --breakdown
echo "   ($((SECONDS - t0)) s) $(grep -E '^fusegraph: loading' /tmp/pre.txt)"
grep -E "^  (fused.gated_matmul_id|matmul_id|attention|matmul) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
pre w-moe-12-q4_k "FG_DEBUG_DEVICE_QUANT_INIT=1 FG_DEBUG_MOE_HALF_X=1" --steps 5 --warmup 2 --breakdown
grep -E "^  (fused.gated_matmul_id|matmul_id|convert) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
STEP_TIMEOUT=90 stepf w-moe-12-q4_k "FG_DEBUG_DEVICE_QUANT_INIT=1"
pre w-moe-12 "" --steps 5 --warmup 2 --breakdown
grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
STEP_TIMEOUT=90 stepf w-dense-q4_k "FG_DEBUG_DEVICE_QUANT_INIT=1"
for e in "" "FG_DEBUG_MOE_HALF_X=1"; do
  [ "$(left)" -gt 130 ] || break
  echo "== prefill expert GEMMs, block types, ${e:-default} (x f32, and f16 x: element loads / with the switch 16-byte)"
  env $e timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='_id/w-moe/.*/q[46]_[0k]/T512' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  cat /tmp/k.txt >> "$OUT/kern-full.txt"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,5,6,8,11
done
if [ "$(left)" -gt 100 ]; then
  echo "== decode q4_K / q5_K GEMVs"
  timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='/w-(dense|moe)/.*/q[45]_k/T(1|8)' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  cat /tmp/k.txt >> "$OUT/kern-full.txt"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,5,6,8,11
fi
echo "call done after $((SECONDS - S)) s"
