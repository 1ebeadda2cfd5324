#!/usr/bin/env bash
# The fourteenth session's third GPU call: why DP4A launches that are faster
# in the kernel benchmark make steps slower (W-moe-12 q4_K 0.69 -> 0.78 ms
# with DP4A on its dense q, o and lm head; W-dense q4_0 3.31 -> 4.22).
# 1. steps with and without programmatic launch (nopdl), DP4A off and on,
#    and on without its prologue load (FG_DEBUG_DP4A_PROLOGUE=0);
# 2. the W-moe-12 q4_K kernels at T = 1, tensor cores against DP4A;
# 3. --breakdown of W-moe-12 q4_K, DP4A off and on (90 s each).
#   bash scripts/gpu-s14-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
step() { # workload, env...
  local w="$1"; shift
  [ $(left) -gt 45 ] || { echo "skipped: $w $*"; return; }
  env "$@" timeout 55 fusegraph bench --workload "$w" --compare fused,graph,nopdl --steps 30 > /tmp/b.txt 2>&1
  echo "== $w $*: $(grep -E '^graph' /tmp/b.txt | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ')"
}
{
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=0
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=3
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=3 FG_DEBUG_DP4A_PROLOGUE=0
step w-dense-q4_0 FG_DEBUG_GEMV_DP4A=0
step w-dense-q4_0 FG_DEBUG_GEMV_DP4A=2
step w-dense-q4_0 FG_DEBUG_GEMV_DP4A=2 FG_DEBUG_DP4A_PROLOGUE=0
} 2>&1 | tee "$OUT/steps.txt"
for v in --no-gemv-dp4a ""; do
  [ $(left) -gt 60 ] || { echo "skipped kernels $v"; continue; }
  echo "== kernels ${v:-default}"
  timeout 50 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter='^(matmul|fused.gated_matmul)/w-moe/.*/q4_k/T1' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,4,6,8,11
done 2>&1 | tee "$OUT/kernels.txt"
for v in 0 3; do
  [ $(left) -gt 95 ] || { echo "skipped: breakdown $v"; continue; }
  FG_DEBUG_GEMV_DP4A=$v timeout 90 fusegraph bench --workload w-moe-12-q4_k --compare graph --steps 10 --breakdown > "$OUT/bd-moe-$v.txt" 2>&1
  echo "== breakdown w-moe-12-q4_k dp4a=$v rc $?"; grep -E "^  [a-z]" "$OUT/bd-moe-$v.txt" | head -14
done
echo "done after $((SECONDS - S)) s"
