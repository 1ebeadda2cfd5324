#!/usr/bin/env bash
# (The two-row-group form it measured was measured slower and removed; its
# code is commit 76bd677.)
# Thirty-first session, call 2: the flash prefill with two query row groups a
# warp (FG_DEBUG_FLASH_ROW_GROUPS=2; FlashAttention-2's 32 rows a warp), with
# 64- and 32-key tiles and 2 or 4 warps — the GPU tests in each form, then
# the kernel alone and W-dense's prefills at 512 and 2048 tokens beside the
# default.
#   bash scripts/gpu-s31-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
F='*FlashPrefill*:*GpuFused*attention*:GpuPrefillThenDecode*'
for cfg in "FG_DEBUG_FLASH_ROW_GROUPS=2" "FG_DEBUG_FLASH_ROW_GROUPS=2 FG_DEBUG_FLASH_KEYS=32" "FG_DEBUG_FLASH_ROW_GROUPS=2 FG_DEBUG_FLASH_KEYS=32 FG_DEBUG_FLASH_WARPS=2"; do
  env $cfg timeout 120 fusegraph_gpu_tests --gtest_filter="$F" > "$OUT/gtest-$(echo $cfg | tr -cd 'A-Z0-9=_' | tail -c 40).txt" 2>&1
  echo "== tests $cfg (rc $?): $(summ "$OUT/gtest-$(echo $cfg | tr -cd 'A-Z0-9=_' | tail -c 40).txt")"
done
CFGS=("" "FG_DEBUG_FLASH_ROW_GROUPS=2" "FG_DEBUG_FLASH_ROW_GROUPS=2 FG_DEBUG_FLASH_KEYS=32" "FG_DEBUG_FLASH_ROW_GROUPS=2 FG_DEBUG_FLASH_KEYS=32 FG_DEBUG_FLASH_WARPS=2" "FG_DEBUG_FLASH_KEYS=32")
for c in "${CFGS[@]}"; do
  echo "== kernel [$c]"
  env $c timeout 60 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='attention/w-dense/prefill' > /tmp/ak.txt 2>&1
  grep -E "prefill" /tmp/ak.txt | tr -s ' ' | cut -c1-160 | head -4
done
for round in 1 2; do
  for c in "${CFGS[@]:0:4}"; do
    pre w-dense "$c" --steps 5 --warmup 2 --breakdown
    grep -E "^  fused.attention_convert" /tmp/pre.txt | tr -s ' '
  done
done
for c in "${CFGS[@]:0:3}" "${CFGS[0]}"; do
  PRE=2048 pre w-dense "$c" --steps 3 --warmup 1 --ctx 4096 --breakdown
  grep -E "^  fused.attention_convert" /tmp/pre.txt | tr -s ' '
done
echo "call done after $((SECONDS - S)) s"
