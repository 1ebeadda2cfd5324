#!/usr/bin/env bash
# For the session after the twenty-eighth (its device time was spent after
# one call of 181 s): what that call left undecided.
# 1. argsort / top_k (OpsGpuTest's GpuOps cases; the twenty-eighth call's
#    filter '*GpuFused*argsort*' matched none of them) plain, then under
#    memcheck with time to finish: the twenty-seventh session's fix (their
#    shared keys in whole 16-byte units) is still unconfirmed.
# 2. fg_bench_prefill_gemms with every form: which part of "merged" (q|k|v,
#    gate|up) pays, and whether strided batches (no repack) get it.
# 3. Whole prefills of 512 tokens with the GEMMs chained
#    (FG_DEBUG_WORKSPACE_SLOTS=1) against parallel branches (the default),
#    alternating, on the four workloads.
# 4. The opt-in gated_gemm (a prefill chunk's gate|up as one stacked GEMM,
#    then the GLU; written in the twenty-eighth session without a GPU): its
#    GpuFused cases (stacked and split, f16 / bf16, every GLU kind) and the
#    prefill-then-decode tests with it on, then W-dense's prefill of 512
#    and 2048 tokens with it, alternating with the default.
# 5. Decode steps with and without the status fences.
# Items 1, 2 and 4's tests here (about 550 s: a call of its own, D = 580);
# the timings of items 3 to 5 in scripts/gpu-s28-next2.sh (another call).
#   bash scripts/gpu-s28-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
# The runner now places every weight in one allocation (runtime/Program.h,
# weightOffsets): every GPU test exercises it; these first.
F='*argsort*:*top_k*:GpuInputCheck*:*gated_gemm*:GpuDemo*:GpuSession*:GpuPrefillThenDecode*:Types/*'
timeout 200 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 200 compute-sanitizer --tool memcheck $T --gtest_brief=1 --gtest_filter='*argsort*:*top_k*:*gated_gemm*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $? at $((SECONDS - S)) s: $(summ "$OUT/sanitize-memcheck.txt")"
fi
timeout 120 fg_bench_prefill_gemms --tokens 512,2048 > "$OUT/prefill-gemms.txt" 2>&1
echo "prefill gemms rc $? at $((SECONDS - S)) s"
grep -E '^# T' "$OUT/prefill-gemms.txt"
echo "done after $((SECONDS - S)) s"
