#!/usr/bin/env bash
# The next session's first GPU call (written in the eleventh, after its last
# call): the grouped expert GEMM over block-quantised experts
# (FG_DEBUG_GROUPED_QUANT=1, opt-in until this passes).
# 1. Its GPU test, the 16-bit grouped GEMM's tests and the quantised
#    workloads with it on, then memcheck over its test;
# 2. W-moe-12 q4_K's 512-token prefill with it off and on, twice each, with
#    breakdowns (61.0 ms off in the eleventh session; the target is <= 8);
#    W-moe-12 q8_0 the same once;
# 3. the eleventh session's rope_attention once more beside the default.
#   bash scripts/gpu-s12-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
FG_DEBUG_GROUPED_QUANT=1 timeout 200 "$T" \
  --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised:GpuGroupedExpert*:Types/GpuQuantWorkload*:GpuPrefillThenDecode*' \
  > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/tests.txt" | head -12 | tr '\n' ' ')"
FG_UNDER_SANITIZER=memcheck timeout 120 compute-sanitizer --tool memcheck --print-limit 5 \
  "$T" --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|PASSED|FAILED  \]' "$OUT/memcheck.txt" | tr '\n' ' ')"
{
for w in w-moe-12-q4_k w-moe-12-q4_k w-moe-12-q8_0; do
  for on in 0 1; do
    [ $(left) -gt 60 ] || break 2
    echo "== $w prefill 512, FG_DEBUG_GROUPED_QUANT=$on"
    FG_DEBUG_GROUPED_QUANT=$on timeout $(( $(left) - 30 )) fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
    grep -E "prefill_512  |^  [a-z]" /tmp/p.txt | head -8
  done
done
for flag in "" "--enable-fusion rope_attention"; do
  [ $(left) -gt 20 ] || break
  timeout 60 fusegraph bench --workload w-tiny --compare fused,graph --steps 50 $flag > /tmp/b.txt 2>&1
  echo "w-tiny ${flag:-default} $(grep graph-fused /tmp/b.txt | head -1)"
done
} 2>&1 | tee "$OUT/steps.txt"
# The eleventh session's unexplained demo failure under memcheck (docs/TESTING.md):
# racecheck and initcheck over the demo in the time left (every prologue on).
for tool in racecheck initcheck; do
  [ $(left) -gt 60 ] || break
  FG_DEBUG_PDL_PREFETCH_MAX_MB=1024 GTEST_EXTRA="--gtest_filter=GpuDemo*" timeout $(( $(left) - 20 )) \
    bash scripts/gpu-sanitize.sh $tool > "$OUT/sanitize-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED  \]' "$OUT/sanitize-$tool.txt" | tr '\n' ' ' | head -c 400)"
done
echo "done after $((SECONDS - S)) s"
