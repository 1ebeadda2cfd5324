#!/usr/bin/env bash
# The first GPU call of the next session (written at the end of the seventh):
# 1. the seventh session's unvalidated opt-ins — the gemm-inputs pass
#    (--gemm-x-once: GpuPrefillThenDecode.GemmInputConvertsEqualsDecodeOnly),
#    gated_matmul_id_chunk (GatedExpertChunksEqualsDecodeOnly) and
#    the single-half flash prefill (FG_DEBUG_FLASH_HALF=1, with and without
#    FG_DEBUG_FLASH_MIN_BLOCKS=3: GpuFlashPrefillOptions.HalfQAndP) — then
#    the rest of the GPU suite (a cold machine needs > 240 s: on x2 it is
#    split over both GPUs);
# 2. W-dense / W-moe-12 prefills of 512 tokens: default, --gemm-x-once, the
#    opt-in gated expert fusion of prefill chunks (--enable-fusion
#    gated_matmul_id_chunk), the half flash kernel at 0 and 3 minimum blocks
#    (all in one run).
# If a form passes and is faster, make it the default (Compile.h
# gemmInputConverts, Kernel.h attentionPrefillHalf / MinBlocks, Pattern.cpp
# optInFusionPatterns) and record it.
#   bash scripts/gpu-next-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
NEW='GpuPrefillThenDecode.GemmInputConvertsEqualsDecodeOnly:GpuPrefillThenDecode.GatedExpertChunksEqualsDecodeOnly:GpuFlashPrefillOptions.HalfQAndP'
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 150 "$T" --gtest_filter="$NEW" > "$OUT/new-tests.txt" 2>&1
echo "new tests rc $? after $((SECONDS - S)) s"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|worst" "$OUT/new-tests.txt" | head
suite() { # GPU shard-index shard-count
  CUDA_VISIBLE_DEVICES=$1 FG_KERNEL_CACHE=/tmp/fgk$1 GTEST_SHARD_INDEX=$2 GTEST_TOTAL_SHARDS=$3 \
    timeout $(( $(left) - 20 )) "$T" --gtest_filter="-$NEW" > "$OUT/suite-$2.txt" 2>&1
  echo "suite shard $2/$3 rc $? after $((SECONDS - S)) s" >> "$OUT/suite-$2.txt"
}
pb() { timeout 90 "$@" > /tmp/p.txt 2>&1; echo "rc $?"; grep -E "prefill_512  |attention|matmul" /tmp/p.txt | head -5; }
if [ "$ngpu" -ge 2 ]; then
  suite 1 0 1 & sp=$!
  export CUDA_VISIBLE_DEVICES=0
  for w in w-dense w-moe-12; do
    echo "== $w default"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
    echo "== $w --gemm-x-once"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown --gemm-x-once
    echo "== $w --enable-fusion gated_matmul_id_chunk"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown --enable-fusion gated_matmul_id_chunk
    for mb in 0 3; do
      echo "== $w flash half, min blocks $mb"
      FG_DEBUG_FLASH_HALF=1 FG_DEBUG_FLASH_MIN_BLOCKS=$mb pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
    done
  done 2>&1 | tee "$OUT/prefill.txt"
  wait $sp
else
  for w in w-dense w-moe-12; do
    [ $(left) -gt 300 ] || break
    echo "== $w default"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
    echo "== $w --gemm-x-once"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown --gemm-x-once
    echo "== $w flash half"; FG_DEBUG_FLASH_HALF=1 pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
  done 2>&1 | tee "$OUT/prefill.txt"
  suite 0 0 1
fi
for f in "$OUT"/suite-*.txt; do
  echo "$(basename $f): $(grep -cE '^\[       OK \]' $f) ok; $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|rc ' $f | tr '\n' ' ' | cut -c1-400)"
done
