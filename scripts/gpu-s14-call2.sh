#!/usr/bin/env bash
# The fourteenth session's second GPU call, after DP4A became the default for
# dense q4_K / q8_0 launches above 4 MiB (EmitOptions::gemvDp4a = 3):
# 1. W-moe-12 q4_K steps at the new default against the tensor cores (0);
# 2. kernels at T = 1, q4_0 and q8_0 (q4_K for scale): tensor cores against
#    DP4A, and q4_0 DP4A at other unrolls and warp targets (why is its step
#    27 % slower on DP4A?);
# 3. memcheck and racecheck over the DP4A tests (several tiles a block,
#    q8_0 / q4_0, experts: not yet under a sanitizer);
# 4. the quantised GPU tests at the new defaults.
#   bash scripts/gpu-s14-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
summ() { grep -E '^\[  (PASSED|FAILED)|FAILED  \]|ERROR SUMMARY|Failure|actual' "$1" | head -14 | tr '\n' ' '; }
step() { # workload, dp4a (empty: the default)
  [ $(left) -gt 40 ] || { echo "skipped: $1 $2"; return; }
  env ${2:+FG_DEBUG_GEMV_DP4A=$2} timeout 50 fusegraph bench --workload "$1" --compare fused,graph --steps 30 > /tmp/b.txt 2>&1
  echo "== $1 dp4a=${2:-default}: $(grep -E 'graph-fused' /tmp/b.txt | tr -s ' ')"
}
{ step w-moe-12-q4_k ""; step w-moe-12-q4_k 0; } 2>&1 | tee "$OUT/steps.txt"
kern() { # label, flags...
  local l="$1"; shift
  [ $(left) -gt 60 ] || { echo "skipped kernels $l"; return; }
  echo "== kernels $l"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas "$@" --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,4,6,8,11
}
F='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/.*/(q4_0|q8_0)/T1'
{
kern "tensor cores" --no-gemv-dp4a "$F"
kern "dp4a" --gemv-dp4a "$F"
F0='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/.*/q4_0/T1'
kern "dp4a q4_0 unroll 4 (2 a warp)" --gemv-dp4a --gemv-dp4a-unroll=4 "$F0"
kern "dp4a q4_0 warps 32" --gemv-dp4a --gemv-dp4a-warps=32 "$F0"
kern "dp4a q4_0 warps 8" --gemv-dp4a --gemv-dp4a-warps=8 "$F0"
} 2>&1 | tee "$OUT/kernels.txt"
for tool in memcheck racecheck; do
  [ $(left) -gt 70 ] || { echo "skipped: $tool"; continue; }
  FG_UNDER_SANITIZER=$tool timeout 100 compute-sanitizer --tool $tool --print-limit 5 "$T" --gtest_filter='GpuQuantGemv.Q4KDp4a*' > "$OUT/$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(summ "$OUT/$tool.txt")"
done
L=$(( $(left) - 5 ))
if [ $L -gt 30 ]; then
  timeout $L "$T" --gtest_filter='GpuQuantGemv.*:GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.Quantised*' > "$OUT/tests-default.txt" 2>&1
  echo "quant tests at the defaults rc $? (limit $L s): $(summ "$OUT/tests-default.txt")"
  grep -cE '^\[       OK' "$OUT/tests-default.txt"
fi
echo "done after $((SECONDS - S)) s"
