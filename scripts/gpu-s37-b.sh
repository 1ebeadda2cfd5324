#!/usr/bin/env bash
# The thirty-seventh session's lean call (its device time went to refused
# starts): what decides a default or fills an issue's table first —
#   the token launch at 1024 threads against 256 (tests, greedy and drawn
#   steps), the whole patterns table, the f16 GEMVs and decode attention with
#   programmatic edges (--pdl), then what time is left for the rest of
#   gpu-s37-a.sh (breakdowns, Nsight).
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s37-b.sh 330  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-330}
source scripts/gpu-call-lib.sh
timeout 90 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling*:GpuFlashPrefillOptions*:GpuInputCheck*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure" "$OUT/gtest.txt" | head -8
FG_DEBUG_GREEDY_THREADS=1024 timeout 45 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling.DeviceDraw*' > "$OUT/gtest-1024.txt" 2>&1
echo "== greedy / draw tests at 1024 threads (rc $?): $(summ "$OUT/gtest-1024.txt")"
for round in 1 2; do
  for args in "" "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1" "--temperature 0.8 --seed 1"; do
    [ "$(left)" -gt 200 ] || break
    stepf w-tiny "" $args
    stepf w-tiny "FG_DEBUG_GREEDY_THREADS=1024" $args
  done
done
[ "$(left)" -gt 200 ] && stepf w-dense "" && stepf w-dense "FG_DEBUG_GREEDY_THREADS=1024"
if [ "$(left)" -gt 110 ]; then
  pats 110
fi
KERN_MIN_LEFT=70 kern "f16 GEMVs T1 --pdl" --pdl --benchmark_filter='^(matmul|fused)[a-z_.]*/w-(dense|moe)/.*/f16/T1(/|$)'
for f in --pdl ""; do
  [ "$(left)" -gt 40 ] || break
  akern "decode attention $f" $f --benchmark_filter='^attention/w-(dense|moe)/kv(1024|8192|32768)/f16/T1(/|$)'
done
if [ "$(left)" -gt 60 ]; then
  timeout 50 fusegraph bench --workload w-dense-q4_k --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/bd-w-dense-q4_k.txt" 2>&1
  echo "== breakdown w-dense-q4_k (rc $?)"
fi
echo "call done after $((SECONDS - S)) s"
