#!/usr/bin/env bash
# Twenty-eighth session, call 1: the argsort / top_k shared memory in whole
# 16-byte units under memcheck (the twenty-seventh session's memchecks ran
# past their limits: the tests run plain first here, so the sanitizer finds
# their kernels compiled); a prefill layer's GEMMs in six forms
# (fg_bench_prefill_gemms: are merged q|k|v and gate|up, cuBLASLt or graph
# branches worth building?); the prefill of 512 tokens of every workload
# with its breakdown (first since the twelfth session); decode steps with
# and without the status fences.
#   bash scripts/gpu-s28-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
F='*GpuFused*argsort*:*GpuFused*top_k*:GpuInputCheck*'
timeout 90 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 150 compute-sanitizer --tool memcheck $T --gtest_brief=1 --gtest_filter="$F" \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $? at $((SECONDS - S)) s: $(summ "$OUT/sanitize-memcheck.txt")"
fi
timeout 100 fg_bench_prefill_gemms --tokens 512,2048 > "$OUT/prefill-gemms.txt" 2>&1
echo "prefill gemms rc $? at $((SECONDS - S)) s"
grep -E '^# T' "$OUT/prefill-gemms.txt"
{
for w in w-dense w-dense-q4_k w-moe-12 w-moe-12-q4_k; do
  [ "$(left)" -gt 70 ] || { echo "skipped prefill $w"; continue; }
  timeout 60 fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown \
    > "$OUT/prefill-$w.txt" 2>&1
  echo "prefill $w rc $? at $((SECONDS - S)) s: $(grep -E 'prefill|ms' "$OUT/prefill-$w.txt" | head -3 | tr '\n' ' ')"
done
for r in 1 2; do
  stepf w-tiny ""
  stepf w-tiny "FG_DEBUG_STATUS_FENCE=0 FG_KERNEL_CACHE=/tmp/fgk-nf"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
