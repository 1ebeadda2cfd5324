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
# About 600 s in all: give it a call of its own (D = 580) and the steps
# after it a second one if the budget is short.
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
# A prefill of PRE (512) tokens: workload $1, environment $2 ("" or VAR=V
# ...), bench flags after (--steps 5 --warmup 2 unless given).
pre() {
  local w="$1" envs="$2"; shift 2
  [ "$(left)" -gt 60 ] || { echo "skipped prefill $w $envs $*"; return; }
  env $envs timeout 60 fusegraph bench --workload "$w" --prefill "${PRE:-512}" "$@" > /tmp/pre.txt 2>&1
  local rc=$?
  { echo "== $w $envs $* (rc $rc)"; cat /tmp/pre.txt; } >> "$OUT/prefill-full.txt"
  echo "== prefill $w ${envs:-default} $* (rc $rc): $(grep -E '^prefill_' /tmp/pre.txt | awk '{print $3, $4}')"
}
{
S5="--steps 5 --warmup 2"
for r in 1 2; do
  pre w-dense "" $S5
  pre w-dense "" $S5 --enable-fusion gated_gemm
done
PRE=2048 pre w-dense "" --ctx 4096 --steps 3 --warmup 1
PRE=2048 pre w-dense "" --ctx 4096 --steps 3 --warmup 1 --enable-fusion gated_gemm
for w in w-dense w-moe-12 w-dense-q4_k w-moe-12-q4_k; do
  for r in 1 2; do
    pre $w "" $S5
    pre $w "FG_DEBUG_WORKSPACE_SLOTS=1" $S5
  done
done
for r in 1 2; do
  stepf w-tiny ""
  stepf w-tiny "FG_DEBUG_STATUS_FENCE=0 FG_KERNEL_CACHE=/tmp/fgk-nf"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
