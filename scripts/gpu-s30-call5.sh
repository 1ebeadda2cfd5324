#!/usr/bin/env bash
# Thirtieth session, call 5: the flash prefill's S mmas with the head-dim
# steps outer (FG_DEBUG_FLASH_KS_OUTER=1; 230 registers where the default
# takes 250; with 32-key tiles 168, so 3 blocks a SM), one MUFU a softmax
# exponential (ex2.ftz, both forms), and fused.gated_gemm's 16-bit C (on by
# default; FG_DEBUG_GATED_GEMM_NARROW=0 is the f32 form) — GPU tests of each
# form, then prefills at positions 0..N-1 alternating the forms.
#   bash scripts/gpu-s30-call5.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
F='GpuFlashPrefill*:GpuPrefillThenDecode*:*gated_gemm*:*GatedGemm*:GpuDemo*'
for envs in "" "FG_DEBUG_FLASH_KS_OUTER=1" "FG_DEBUG_FLASH_KS_OUTER=1 FG_DEBUG_FLASH_KEYS=32"; do
  env $envs timeout 150 fusegraph_gpu_tests --gtest_filter="$F" > /tmp/g.txt 2>&1
  echo "== tests ${envs:-default} (rc $?): $(summ /tmp/g.txt)"
  cp /tmp/g.txt "$OUT/gtest-$(echo "${envs:-default}" | tr ' =' '_-').txt"
done
A="FG_DEBUG_FLASH_KS_OUTER=1"; B="FG_DEBUG_FLASH_KS_OUTER=1 FG_DEBUG_FLASH_KEYS=32"
for n in 512 2048; do
  for envs in "" "$A" "$B" "" "$A" "$B"; do
    PRE=$n pre w-dense "$envs" --steps 5 --warmup 2 --breakdown
    grep -E "^  attention|^  fused.gated_gemm  " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  done
done
for envs in "FG_DEBUG_GATED_GEMM_NARROW=0" "" "FG_DEBUG_GATED_GEMM_NARROW=0" ""; do
  PRE=2048 pre w-dense "$envs" --steps 5 --warmup 2 --breakdown
  grep -E "^  fused.gated_gemm" /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
done
PRE_TIMEOUT=150 pre w-moe-12-q4_k "" --steps 7 --warmup 2 --breakdown
grep -E "^  [a-z]" /tmp/pre.txt | head -12
echo "done after $((SECONDS - S)) s"
