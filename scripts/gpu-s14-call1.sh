#!/usr/bin/env bash
# For the fourteenth session's first GPU call (written in the thirteenth,
# after its last call): the DP4A GEMV's rule (FG_DEBUG_GEMV_DP4A=1: launches
# without the prefetch prologue, i.e. dense weights above 4 MiB and every
# expert-indexed launch; q4_K, q8_0, q4_0) against the tensor cores, to
# decide whether it becomes the default. In order, as the deadline allows:
# 1. GpuQuantGemv.Q4KDp4a* (=2 inside), GpuQuantModel*, the quantised
#    workload tests and quantised prefill==decode under the rule;
# 2. steps (~38 s each): W-dense q4_K, W-moe-12 q4_K, W-dense q8_0 / q4_0,
#    Q4_K_M-like at 0 and 1; W-moe-12 q4_K at 3 (the rule for dense only);
# 3. kernels at T = 1 (q4_K, q8_0, q4_0), tensor cores against DP4A;
# 4. memcheck and racecheck over the DP4A tests (widened after the last
#    call: several tiles a block, q8_0 / q4_0, experts);
# 5. --breakdown of W-moe-12 q4_K at 0 and 1 (90 s each).
#   bash scripts/gpu-s14-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
summ() { grep -E '^\[  (PASSED|FAILED)|FAILED  \]|ERROR SUMMARY|Failure|actual|worst' "$1" | head -14 | tr '\n' ' '; }
timeout 90 "$T" --gtest_filter='GpuQuantGemv.*:GpuQuantModel*' > "$OUT/tests-default.txt" 2>&1
echo "quant tests at defaults rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-default.txt")"
FG_DEBUG_GEMV_DP4A=1 timeout 120 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*:GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.QuantisedWeightsEqualsDecodeOnly' > "$OUT/tests-rule.txt" 2>&1
echo "tests under the rule rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-rule.txt")"
step() { # label, workload, dp4a
  [ $(left) -gt 40 ] || { echo "skipped: $2 $1"; return; }
  FG_DEBUG_GEMV_DP4A=$3 timeout 50 fusegraph bench --workload "$2" --compare fused,graph --steps 30 > /tmp/b.txt 2>&1
  echo "== $2 dp4a=$3 ($1): $(grep -E 'graph-fused' /tmp/b.txt | tr -s ' ')"
}
# Steps first (what decides the default; ~38 s each), then the kernels, the
# sanitizers and the breakdowns as the deadline allows.
{
for w in w-dense-q4_k w-moe-12-q4_k w-dense-q8_0 w-dense-q4_0 w-dense-q4_k_m; do
  for v in 0 1; do step "rule" $w $v; done
done
step "rule, dense launches only" w-moe-12-q4_k 3
} 2>&1 | tee "$OUT/steps.txt"
# Kernels: q4_K, q8_0, q4_0 at T = 1, tensor cores against DP4A.
for v in "" "--gemv-dp4a"; do
  [ $(left) -gt 70 ] || { echo "skipped kernels $v"; continue; }
  echo "== kernels ${v:-tensor cores}"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter='^(matmul|fused.gated_matmul)/w-dense/.*/(q4_k|q8_0|q4_0)/T1' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,4,6,8,11
done 2>&1 | tee "$OUT/kernels.txt"
# The DP4A tests gained blocks of several tiles, q8_0 / q4_0 and experts
# after the thirteenth session's last call: memcheck and racecheck over them.
for tool in memcheck racecheck; do
  [ $(left) -gt 50 ] || { echo "skipped: $tool"; continue; }
  FG_UNDER_SANITIZER=$tool timeout 60 compute-sanitizer --tool $tool --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(summ "$OUT/$tool.txt")"
done
for v in 0 1; do
  [ $(left) -gt 100 ] || { echo "skipped: breakdown $v"; continue; }
  FG_DEBUG_GEMV_DP4A=$v timeout 90 fusegraph bench --workload w-moe-12-q4_k --compare graph --steps 10 --breakdown > "$OUT/bd-moe-$v.txt" 2>&1
  echo "== breakdown w-moe-12-q4_k dp4a=$v rc $?"; grep -E "matmul|attention|graph" "$OUT/bd-moe-$v.txt" | head -10
done
echo "done after $((SECONDS - S)) s"
