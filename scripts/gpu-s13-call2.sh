#!/usr/bin/env bash
# Thirteenth session, call 2: the q4_K GEMV on DP4A (opt-in,
# FG_DEBUG_GEMV_DP4A=1 / fg_bench_kernels --gemv-dp4a) and the grouped expert
# GEMM's new rule (256 threads for quantised experts, deferred decode for two
# streams).
# 1. GPU tests: the DP4A tests, the quantised GEMV tests at the new MoE
#    defaults, quantised prefill == decode; memcheck + racecheck on DP4A;
# 2. kernels at T = 1, W-dense q4_K shapes: tensor cores vs DP4A (+ unroll 1,
#    4 and 24 warps per SM);
# 3. steps: W-dense q4_K, W-moe-12 q4_K, Q4_K_M-like, tensor cores vs DP4A,
#    interleaved; W-moe-12 q4_K prefill 512 at the new defaults.
#   bash scripts/gpu-s13-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
summ() { grep -E '^\[  (PASSED|FAILED)|FAILED  \]|ERROR SUMMARY|Failure|normalizedError|Expected|Which is' "$1" | head -12 | tr '\n' ' '; }
timeout 120 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/tests-dp4a.txt" 2>&1
echo "dp4a tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-dp4a.txt")"
timeout 150 "$T" --gtest_filter='GpuQuantGemv.*:GpuPrefillThenDecode.QuantisedWeightsEqualsDecodeOnly' > "$OUT/tests-quant.txt" 2>&1
echo "quant tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests-quant.txt")"
FG_UNDER_SANITIZER=memcheck timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? after $((SECONDS - S)) s: $(summ "$OUT/memcheck.txt")"
FG_UNDER_SANITIZER=racecheck timeout 60 compute-sanitizer --tool racecheck --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4aExact*' > "$OUT/racecheck.txt" 2>&1
echo "racecheck rc $? after $((SECONDS - S)) s: $(summ "$OUT/racecheck.txt")"
K='^(matmul|fused.gated_matmul)/w-dense/.*/q4_k/T1'
for v in "" "--gemv-dp4a" "--gemv-dp4a --gemv-dp4a-unroll=1" "--gemv-dp4a --gemv-dp4a-unroll=4" "--gemv-dp4a --gemv-dp4a-warps=24"; do
  [ $(left) -gt 200 ] || { echo "skipped kernels $v"; continue; }
  echo "== kernels ${v:-tensor cores}"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter="$K" --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  cat /tmp/k.md; cp /tmp/k.md "$OUT/kernels-$(echo "${v:-tc}" | tr -dc 'a-z0-9=')".md
done 2>&1 | tee "$OUT/kernels.txt"
step() { # label, workload, env...
  local label=$1 w=$2; shift 2
  [ $(left) -gt 45 ] || { echo "skipped: $w $label"; return; }
  env "$@" timeout 60 fusegraph bench --workload "$w" --compare fused,graph --steps 30 > /tmp/b.txt 2>&1
  echo "== $w $label: $(grep -E 'graph|fused|ms' /tmp/b.txt | tail -3 | tr -s ' ' | tr '\n' ' ')"
}
{
for round in 1 2; do
  for w in w-dense-q4_k w-moe-12-q4_k; do
    step "tensor cores" $w FG_X=1
    step "dp4a" $w FG_DEBUG_GEMV_DP4A=1
  done
done
if [ $(left) -gt 90 ]; then
  echo "== w-moe-12-q4_k prefill 512 (new defaults)"
  timeout $(( $(left) - 10 )) fusegraph bench --workload w-moe-12-q4_k --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1
  grep -E "prefill_512  |matmul_id" /tmp/p.txt | head -4
fi
} 2>&1 | tee "$OUT/steps.txt"
cp /tmp/b.txt "$OUT/last-bench.txt" 2>/dev/null
echo "done after $((SECONDS - S)) s"
