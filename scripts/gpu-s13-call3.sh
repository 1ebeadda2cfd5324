#!/usr/bin/env bash
# Thirteenth session, call 3: the DP4A GEMV with its first tile loaded before
# the programmatic-launch wait and the next tile's loads before each tile's
# arithmetic (call 2: kernels faster, steps slower).
# 1. its GPU tests (tolerance 2e-2 against the reference), memcheck, racecheck;
# 2. kernels at T = 1 (W-dense q4_K shapes): tensor cores, DP4A, DP4A unroll 4;
# 3. steps with --breakdown: W-dense q4_K (tc, dp4a, dp4a unroll 4),
#    W-moe-12 q4_K (tc, dp4a).
#   bash scripts/gpu-s13-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-400}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
summ() { grep -E '^\[  (PASSED|FAILED)|FAILED  \]|ERROR SUMMARY|Failure|actual' "$1" | head -12 | tr '\n' ' '; }
timeout 60 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/tests-dp4a.txt" 2>&1
echo "dp4a tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-dp4a.txt")"
FG_UNDER_SANITIZER=memcheck timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? after $((SECONDS - S)) s: $(summ "$OUT/memcheck.txt")"
FG_UNDER_SANITIZER=racecheck timeout 60 compute-sanitizer --tool racecheck --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/racecheck.txt" 2>&1
echo "racecheck rc $? after $((SECONDS - S)) s: $(summ "$OUT/racecheck.txt")"
K='^(matmul|fused.gated_matmul)/w-dense/.*/q4_k/T1'
i=0
for v in "" "--gemv-dp4a" "--gemv-dp4a --gemv-dp4a-unroll=4"; do
  i=$((i + 1))
  echo "== kernels ${v:-tensor cores}"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter="$K" --table "$OUT/kernels-$i.md" > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" "$OUT/kernels-$i.md" | cut -d'|' -f2,4,8,11
done 2>&1 | tee "$OUT/kernels.txt"
step() { # label, workload, env...
  local label=$1 w=$2; shift 2
  [ $(left) -gt 45 ] || { echo "skipped: $w $label"; return; }
  env "$@" timeout 60 fusegraph bench --workload "$w" --compare fused,graph --steps 30 --breakdown > "$OUT/step-$w-$label.txt" 2>&1
  echo "== $w $label: $(grep -E '^graph' "$OUT/step-$w-$label.txt" | head -2 | tr -s ' ' | tr '\n' ' ')"
  grep -E "matmul|attention" "$OUT/step-$w-$label.txt" | head -8
}
{
step tc w-dense-q4_k FG_X=1
step dp4a w-dense-q4_k FG_DEBUG_GEMV_DP4A=1
step dp4a-u4 w-dense-q4_k FG_DEBUG_GEMV_DP4A=1 FG_DEBUG_DP4A_UNROLL=4
step tc w-moe-12-q4_k FG_X=1
step dp4a w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=1
step tc2 w-dense-q4_k FG_X=1
step dp4a2 w-dense-q4_k FG_DEBUG_GEMV_DP4A=1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
