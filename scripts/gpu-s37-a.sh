#!/usr/bin/env bash
# Next session's first call (written in the thirty-sixth, whose device time
# ran out): what the thirty-sixth wrote after its last call —
#   the token launch at 1024 threads against 256 (FG_DEBUG_GREEDY_THREADS),
#   greedy and drawn; q loaded before the position with a rope (the default
#   attention's operations unchanged: its tests) and rope_kv_attention's
#   rows written from the body, against the default —
# then Nsight Compute on decode attention at KV 8192 (issue 11's long-KV
# target: 39 % of the bandwidth against >= 70 %).
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s37-a.sh 520  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-520}
source scripts/gpu-call-lib.sh
timeout 150 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling*:GpuSession*:GpuDemo.FusedEqualsUnfused64Steps:*rope_kv_attention*:*rope_attention*:Grid/GpuAttention.DecodeStep*:GpuAttentionEarly*:GpuAttentionReplay*:GpuFlashPrefillOptions*:GpuInputCheck*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|^vocab" "$OUT/gtest.txt" | head -12
FG_DEBUG_GREEDY_THREADS=1024 timeout 60 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling.DeviceDraw*' > "$OUT/gtest-1024.txt" 2>&1
echo "== greedy / draw tests at 1024 threads (rc $?): $(summ "$OUT/gtest-1024.txt")"
steps_round() {
  for w in w-tiny w-dense; do
    [ "$(left)" -gt "$1" ] || break
    stepf $w ""
    stepf $w "FG_DEBUG_GREEDY_THREADS=1024"
  done
  for args in "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1" "--temperature 0.8 --seed 1"; do
    [ "$(left)" -gt "$1" ] || break
    stepf w-tiny "" $args
    stepf w-tiny "FG_DEBUG_GREEDY_THREADS=1024" $args
  done
  for w in w-tiny w-dense w-moe-12-q4_k; do
    [ "$(left)" -gt "$1" ] || break
    stepf $w "" --enable-fusion rope_kv_attention
    stepf $w ""
  done
}
steps_round 300
# Every fusion pattern fused against unfused (issue 13: fused >= unfused on
# every pattern; the last table, of 14 patterns, is the third session's).
if [ "$(left)" -gt 150 ]; then
  pats 150
fi
# Where W-dense q4_K's and W-moe-12 q4_K's steps go now (issue 14's largest misses;
# the last W-dense q4_K breakdown is from the seventeenth session).
for w in w-dense-q4_k w-moe-12-q4_k; do
  [ "$(left)" -gt 130 ] || break
  timeout 70 fusegraph bench --workload $w --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/bd-$w.txt" 2>&1
  echo "== breakdown $w (rc $?)"
done
# W-tiny's launches one by one (device start and end of one traced replay).
if [ "$(left)" -gt 120 ]; then
  timeout 40 fusegraph bench --workload w-tiny --compare fused,graph --steps 10 --warmup 3 --breakdown --breakdown-launches 100 > "$OUT/bd-w-tiny.txt" 2>&1
  echo "== breakdown w-tiny (rc $?)"
fi
# The float GEMVs at T = 1 now (issue 11's 80 / 90 % targets; the last full
# table is the third session's).
# With programmatic edges between the launches (--pdl, new: as a step's graph
# launches them), then without; decode attention both ways.
KERN_MIN_LEFT=100 kern "f16 GEMVs T1 --pdl" --pdl --benchmark_filter='^(matmul|fused)[a-z_.]*/w-(dense|moe)/.*/f16/T1(/|$)'
KERN_MIN_LEFT=100 kern "f16 GEMVs T1" --benchmark_filter='^(matmul|fused)[a-z_.]*/w-(dense|moe)/.*/f16/T1(/|$)'
for f in "" --pdl; do
  [ "$(left)" -gt 80 ] || break
  akern "decode attention $f" $f --benchmark_filter='^attention/w-(dense|moe)/kv(1024|8192|32768)/f16/T1(/|$)'
done
steps_round 150
if [ "$(left)" -gt 100 ]; then
  timeout 90 ncu --clock-control none -k regex:attention -c 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='attention/w-dense/kv8192/f16/T1(/|$)' > "$OUT/ncu-dec8k.txt" 2>&1
  echo "== ncu decode kv8192 (rc $?)"
  grep -E "Duration|Grid Size|Block Size|Registers Per|Achieved Occupancy|DRAM Throughput|Stall|Waves Per SM|Cluster|No Eligible|L2 Hit" "$OUT/ncu-dec8k.txt" | tr -s ' ' | head -30
fi
echo "call done after $((SECONDS - S)) s"
