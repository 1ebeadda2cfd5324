#!/usr/bin/env bash
# The next session's first GPU call (written in the twelfth, after its last
# call): the grouped expert GEMM's opt-in forms.
#  - FG_DEBUG_MOE_THREADS=256: 256 threads a block, half the registers a
#    thread (ptxas: q4_K gate|up 248 -> 124, down 126 -> 78; f16 gate|up
#    130 -> 82, down 168 -> 80), twice the warps an SM;
#  - FG_DEBUG_MOE_QDEFER=1: quantised raw bytes held through the previous
#    step's mmas, decoded when stored to the tile.
# 0. GpuPrefillThenDecode.QuantisedWeightsEqualsDecodeOnly (the defaults,
#    written after the twelfth session's last call);
# 1. GPU tests with each (the grouped GEMMs incl. W-moe shapes, prefill-then-
#    decode), memcheck over the grouped tests at 256 with deferred decode;
# 2. W-moe-12 f16 and q4_K 512-token prefill: default, 256, 256 + deferred
#    (q4_K), 256 + 64-row tiles (f16), interleaved, with breakdowns.
#   bash scripts/gpu-s13-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
# The twelfth session's new test of the defaults (q4_K / q8_0 prefill ==
# decode, prompt lengths 1 .. 2049), then the opt-in forms' tests.
timeout 120 "$T" --gtest_filter='GpuPrefillThenDecode.QuantisedWeightsEqualsDecodeOnly' > "$OUT/tests-quant-prefill.txt" 2>&1
echo "quantised prefill==decode rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|worst' "$OUT/tests-quant-prefill.txt" | head -10 | tr '\n' ' ')"
F='GpuQuantGemv.GroupedExpertGemmQuantised:GpuGroupedExpert*:GpuPrefillThenDecode.GatedExpertChunks*:GpuPrefillThenDecode.F16*'
FG_DEBUG_MOE_THREADS=256 timeout 120 "$T" --gtest_filter="$F" > "$OUT/tests-256.txt" 2>&1
echo "tests 256 rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests-256.txt" | head -8 | tr '\n' ' ')"
FG_DEBUG_MOE_THREADS=256 FG_DEBUG_MOE_QDEFER=1 timeout 60 "$T" \
  --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised' > "$OUT/tests-256-defer.txt" 2>&1
echo "tests 256+defer rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests-256-defer.txt" | head -8 | tr '\n' ' ')"
FG_DEBUG_MOE_QDEFER=1 timeout 60 "$T" --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised' > "$OUT/tests-defer.txt" 2>&1
echo "tests defer rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests-defer.txt" | head -4 | tr '\n' ' ')"
FG_UNDER_SANITIZER=memcheck FG_DEBUG_MOE_THREADS=256 FG_DEBUG_MOE_QDEFER=1 timeout 90 compute-sanitizer --tool memcheck --print-limit 5 \
  "$T" --gtest_filter='GpuQuantGemv.GroupedExpertGemmQuantised:GpuGroupedExpert.ZeroOne*:GpuGroupedExpert.AllPairs*' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|PASSED|FAILED  \]' "$OUT/memcheck.txt" | tr '\n' ' ')"
run() { # label, env...
  local label=$1; shift
  [ $(left) -gt 60 ] || { echo "skipped: $label"; return; }
  echo "== $W $label"
  env "$@" timeout $(( $(left) - 15 )) fusegraph bench --workload "$W" --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
  grep -E "prefill_512  |matmul_id" /tmp/p.txt | head -4
}
{
W=w-moe-12-q4_k
run "default" FG_X=1
run "256 threads" FG_DEBUG_MOE_THREADS=256
run "256 threads + deferred decode" FG_DEBUG_MOE_THREADS=256 FG_DEBUG_MOE_QDEFER=1
W=w-moe-12
run "default" FG_X=1
run "256 threads" FG_DEBUG_MOE_THREADS=256
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
