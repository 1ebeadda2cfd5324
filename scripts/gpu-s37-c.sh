#!/usr/bin/env bash
# The thirty-seventh session's last call: the fused gated GEMV against the
# single GEMV at T = 1, 2, 4, 8 (the patterns table had gated_matmul 0.68x
# at T = 8), the flash options test on one graph, the 1024-thread draw test
# again, rope_kv_attention on W-tiny against the default.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s37-c.sh 200  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-200}
source scripts/gpu-call-lib.sh
KERN_MIN_LEFT=60 kern "gate|up T1-8 --pdl" --pdl --benchmark_filter='^(matmul|fused.gated_matmul)/w-(dense|tiny)/gate_up/(f16|bf16|q4_k)/T[1248](/|$)'
timeout 100 "$T" --gtest_filter='GpuFlashPrefillOptions.StagesSplitWaitAndWarps' > "$OUT/flash.txt" 2>&1
echo "== flash options (rc $?): $(summ "$OUT/flash.txt")"
for i in 1 2; do
  FG_DEBUG_GREEDY_THREADS=1024 timeout 30 "$T" --gtest_filter='GpuSampling.DeviceDrawEqualsTheHostsManyBlocks' > "$OUT/draw1024-$i.txt" 2>&1
  echo "== draw at 1024 threads, run $i (rc $?): $(grep -E '^vocab' "$OUT/draw1024-$i.txt" | tr '\n' ' ')"
done
timeout 30 "$T" --gtest_filter='GpuSampling.DeviceDrawEqualsTheHostsManyBlocks' > "$OUT/draw256.txt" 2>&1
echo "== draw at 256 threads (rc $?): $(grep -E '^vocab' "$OUT/draw256.txt" | tr '\n' ' ')"
for r in 1 2; do
  stepf w-tiny "" --enable-fusion rope_kv_attention
  stepf w-tiny ""
done
echo "call done after $((SECONDS - S)) s"
