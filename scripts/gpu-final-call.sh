#!/usr/bin/env bash
# The fifth session's last GPU call (one H200): the whole suite plain beside
# memcheck and initcheck over the quantised tests (the kernels changed since
# the sanitizer shards of the second call), then the q4_K GEMV variants in the
# kernel benchmark and the quantised workloads against the narrow decoder.
#   bash scripts/gpu-final-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
t() { echo "[$((SECONDS - S)) s] $*"; }
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
Q='GpuQuant*:Types/GpuQuantWorkload*'
( export FG_KERNEL_CACHE=/tmp/fgk1
  for tool in memcheck initcheck; do
    GTEST_EXTRA=--gtest_filter="$Q" timeout 150 bash scripts/gpu-sanitize.sh $tool 0 1 "$T" > /tmp/san-$tool.txt 2>&1
    echo "exit $?" >> /tmp/san-$tool.txt
  done
  timeout 100 "$T" --gtest_filter=GpuQuantGemv.GatedWithBiasEveryGlu --gtest_repeat=30 > /tmp/flake.txt 2>&1
  echo "exit $?" >> /tmp/flake.txt ) &
side=$!
FG_KERNEL_CACHE=/tmp/fgk0 timeout 330 "$T" > /tmp/suite.txt 2>&1; t "suite rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran" /tmp/suite.txt | head -20
wait $side; t "side"
for f in /tmp/san-*.txt; do echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
echo "flake: $(grep -c 'OK \]' /tmp/flake.txt) ok, $(grep -c 'FAILED  \] GpuQuantGemv' /tmp/flake.txt) failed"; grep -A1 "actual:" /tmp/flake.txt | grep -oE "actual: [0-9.e-]+|q4_k glu [0-9] T [0-9]|[a-z0-9_]+ glu [0-9] T [0-9]" | sort | uniq -c | head
export FG_KERNEL_CACHE=/tmp/fgk0
run_k() { local tag=$1; shift; echo "== $tag"; timeout 60 fg_bench_kernels --reps 5 --no-cublas "$@" --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"; grep -E "^\| (matmul|fused|attention)" /tmp/k.md | cut -d'|' -f2-4,6-8,11; }
{
  F='/(q4_k)/T1|w-dense/(lm_head|gate_up)/f16/T1'
  run_k default --benchmark_filter="$F|/q4_k/T(2|8)"
  [ $(left) -gt 150 ] && run_k noprefetch --gemv-wide-prefetch=1 --benchmark_filter="/q4_k/T1"
  [ $(left) -gt 130 ] && run_k occ24 --gemv-wide-occupancy=24 --benchmark_filter="/q4_k/T1"
  [ $(left) -gt 110 ] && run_k occ16 --gemv-wide-occupancy=16 --benchmark_filter="/q4_k/T1"
  [ $(left) -gt 90 ] && run_k narrow --gemv-narrow-quant --benchmark_filter="/q4_k/T1"
} > "$OUT/kernels.txt" 2>&1; t kernels; cat "$OUT/kernels.txt"
{
  for w in w-moe-12-q4_k w-dense-q4_k; do
    [ $(left) -gt 70 ] || break
    echo "== now $w"; timeout 75 fusegraph bench --workload $w --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -5 /tmp/b.txt; grep -E "graph-|ideal" /tmp/b.txt
    echo "== narrow $w"; FG_DEBUG_GEMV_NARROW_QUANT=1 timeout 75 fusegraph bench --workload $w --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -5 /tmp/b.txt; grep -E "graph-" /tmp/b.txt
  done
} > "$OUT/work.txt" 2>&1; t work; cat "$OUT/work.txt"
cp /tmp/suite.txt /tmp/san-*.txt /tmp/flake.txt "$OUT/" 2>/dev/null
