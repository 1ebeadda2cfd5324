#!/usr/bin/env bash
# Thirty-sixth session, call 2: decode attention that writes the step's K and
# V rows itself (fused.rope_kv_attention: q's rope, K's rope and cache write,
# V's cache write and the attention in one launch; W-tiny 10 -> 7 launches a
# layer, W-dense 12 -> 9) under its GPU cases, the whole-model tests,
# memcheck; decode steps with it against `--disable-fusion rope_kv_attention`
# (same binary, alternating) and the previous build (c99a3a2); the tests the
# first call found failing, fixed since (sampling, grouped GEMM forms).
#   bash scripts/gpu-bundle.sh --prev /tmp/prev/build
#   bash scripts/gpu-s36-a.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 200 fusegraph_gpu_tests --gtest_filter='*rope_kv_attention*:*rope_attention*:*rope_set_rows*:GpuDemo.*:GpuSession*:GpuGemvTails*:GpuInputCheck*' > "$OUT/gtest-kv.txt" 2>&1
echo "== rope_kv_attention cases, demo, session (rc $?): $(summ "$OUT/gtest-kv.txt")"
grep -E "^\[  FAILED|Failure|actual|Which is" "$OUT/gtest-kv.txt" | head -20
timeout 150 fusegraph_gpu_tests --gtest_filter='GpuSampling*:GpuGreedyToken*:GpuGroupedExpert.HalfXGivesTheSameBits:GpuQuantGemv.GroupedExpertGemmQuantised' > "$OUT/gtest-fixed.txt" 2>&1
echo "== fixed tests (rc $?): $(summ "$OUT/gtest-fixed.txt")"
grep -E "^\[  FAILED|Failure|actual|^vocab" "$OUT/gtest-fixed.txt" | head -12
timeout 60 compute-sanitizer --tool racecheck fusegraph_gpu_tests --gtest_filter='GpuSampling.DeviceDrawEqualsTheHostsOneBlock' > "$OUT/racecheck-sample.txt" 2>&1
echo "== racecheck, the draw (rc $?): $(summ "$OUT/racecheck-sample.txt")"
timeout 120 compute-sanitizer --tool memcheck fusegraph_gpu_tests --gtest_filter='*rope_kv_attention_neox128_g4_ctx1500_p1021*:*rope_kv_attention_neox128_g4_ctx8192*:*rope_kv_attention*p0_*' > "$OUT/memcheck-kv.txt" 2>&1
echo "== memcheck (rc $?): $(summ "$OUT/memcheck-kv.txt")"
# Decode steps: the fused default against the pieces (same binary), twice,
# and the previous build.
for round in 1 2; do
  for w in w-tiny w-dense w-moe-12 w-dense-q4_k w-moe-12-q4_k; do
    [ "$(left)" -gt 200 ] || break
    stepf $w ""
    stepf $w "" --disable-fusion rope_kv_attention
  done
done
for w in w-tiny w-dense; do
  [ "$(left)" -gt 150 ] || break
  timeout 75 fusegraph-prev bench --workload $w --compare fused,graph --steps 30 > /tmp/p.txt 2>&1
  echo "== prev $w (rc $?): $(grep -E '^graph' /tmp/p.txt | awk '{print $1, $2}')"
done
for args in "" "--disable-fusion rope_kv_attention"; do
  [ "$(left)" -gt 120 ] || break
  timeout 75 fusegraph bench --workload w-tiny --compare fused,graph --steps 30 --breakdown $args > /tmp/b.txt 2>&1
  echo "== breakdown w-tiny ${args:-default} (rc $?): $(grep -E '^graph' /tmp/b.txt | awk '{print $1, $2}')"
  grep -E "^  (attention|fused\.rope|rope|set_rows|fused.rms_norm_matmul |greedy)" /tmp/b.txt | tr -s ' ' | head -8
done
# Greedy tokens with and without the fusion (the same tokens expected).
for args in "" "--disable-fusion rope_kv_attention"; do
  [ "$(left)" -gt 60 ] || break
  timeout 60 fusegraph run w-tiny --device cuda --prompt-ids 1,2,3,4 --steps 64 --ignore-eos $args > /tmp/r.txt 2>&1
  echo "== run w-tiny ${args:-default} (rc $?): tokens $(grep -E '^tokens:' /tmp/r.txt | md5sum | cut -c1-12) $(grep -E '^tokens:' /tmp/r.txt | cut -c1-60) $(grep -E '^decode' /tmp/r.txt | tail -1)"
done
# The draw with 22 distance sets (top-k over W-tiny's flat rows) and what
# the index-order path (temperature alone) spends.
stepf w-tiny "" --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
stepf w-tiny "" --temperature 0.8 --seed 1
if [ "$(left)" -gt 70 ]; then
  timeout 60 ncu --clock-control none -k regex:greedy -c 2 --section SpeedOfLight --section WarpStateStats --section LaunchStats fusegraph bench --workload w-tiny --compare fused,eager --steps 2 --warmup 0 --temperature 0.8 --seed 1 > "$OUT/ncu-draw.txt" 2>&1
  echo "== ncu draw, temperature alone (rc $?)"
  grep -E "Duration|Registers Per|Block Size|Grid Size|Dynamic Shared|Stall|No Eligible|Issue Slots" "$OUT/ncu-draw.txt" | tr -s ' ' | head -24
fi
echo "call done after $((SECONDS - S)) s"
