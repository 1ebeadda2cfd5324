#!/usr/bin/env bash
# Next session's first call (written in the thirty-seventh, whose device time
# went to refused starts):
#   1. the GPU suite's sampling / greedy / session / demo tests at the
#      1024-thread token launch (the default since the thirty-seventh) with
#      the tied top-p cut counted apart (test::topPCutIsTied);
#   2. the H200 steps of every workload against the issues' targets;
#   3. decode attention at KV 8192 / 32768 across blocks an SM, stages and
#      steps (Nsight: 12.5 % occupancy, L1TEX waits), with --pdl.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-a.sh 520  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-520}
source scripts/gpu-call-lib.sh
timeout 150 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling*:GpuSession*:GpuDemo*:GpuInputCheck*:GpuFlashPrefillOptions.StagesSplitWaitAndWarps' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|^vocab" "$OUT/gtest.txt" | head -12
for w in w-tiny w-dense w-moe-12 w-dense-q4_k w-moe-12-q4_k; do
  [ "$(left)" -gt 300 ] || break
  stepf $w ""
  stepf $w "" --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
done
for f in "" "FG_DEBUG_ATTN_BLOCKS_PER_SM=3" "FG_DEBUG_ATTN_BLOCKS_PER_SM=4 FG_DEBUG_ATTN_STAGES=2" \
         "FG_DEBUG_ATTN_STAGES=2" "FG_DEBUG_ATTN_STEPS=2" "FG_DEBUG_ATTN_MIN_TILES=2"; do
  [ "$(left)" -gt 120 ] || break
  echo "== attention $f"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T1(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,8,11
done
# The 1024-thread token launch against 256 where it was not timed (W-moe-12's
# 151936-logit row; a block of 1024 holds a whole SM's registers).
for w in w-moe-12 w-moe-12-q4_k w-dense; do
  [ "$(left)" -gt 60 ] || break
  stepf $w ""
  stepf $w "FG_DEBUG_GREEDY_THREADS=256"
done
echo "call done after $((SECONDS - S)) s"
