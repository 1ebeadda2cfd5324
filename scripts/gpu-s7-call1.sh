#!/usr/bin/env bash
# The seventh session's first GPU call, on one GPU, in order of need:
# 1. the quantised GPU tests under the wide GEMVs' 16-warp rule and the opt-in
#    wide iq4_nl / q6_K tests; 2. the warp rule against the old target (32) and
#    the wide iq4_nl / q6_K kernels against the narrow ones; 3. the Python
#    module's CUDA tests (DLPack into torch); 4. Chrome traces of real steps.
#   bash scripts/gpu-s7-call1.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 200 "$T" --gtest_filter='GpuQuant*:Types/GpuQuantWorkload*' > "$OUT/tests.txt" 2>&1
echo "quant tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc |worst" "$OUT/tests.txt" | head -30
bench() { timeout 60 "$@" --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt; grep -E "graph-fused" /tmp/b.txt; }
{
  for w in w-dense-q4_k w-moe-12-q4_k w-dense-q4_0 w-dense-q8_0; do
    for e in 16 32 16; do
      [ $(left) -gt 250 ] || break 2
      echo "== $w warp target $e"; FG_DEBUG_GEMV_WIDE_WARP_TARGET=$e bench fusegraph bench --workload $w
    done
  done
  for v in "" "--gemv-wide-iq4nl --gemv-wide-q6k"; do
    [ $(left) -gt 220 ] || break
    echo "== iq4_nl, q6_K kernels ${v:-narrow}"
    timeout 60 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter='^(matmul|fused.gated_matmul)/w-dense/.*/(iq4_nl|q6_k)/T1' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
    grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2-4,6-8,11
  done
  for e in 0 1 0; do
    [ $(left) -gt 200 ] || break
    echo "== w-dense-q6_k wide q6_K $e"; FG_DEBUG_GEMV_WIDE_Q6K=$e bench fusegraph bench --workload w-dense-q6_k
  done
} > "$OUT/work.txt" 2>&1; echo "[$((SECONDS - S)) s] work"; cat "$OUT/work.txt"
FG_PYTHON_MODULE_DIR=.gpu/python timeout $(( $(left) > 150 ? 120 : $(left) / 2 )) bash scripts/gpu-python.sh > "$OUT/python.txt" 2>&1
echo "python rc $? after $((SECONDS - S)) s" >> "$OUT/python.txt"; tail -6 "$OUT/python.txt"
timeout 40 fusegraph run demo --device cuda --prompt-ids 1,2,3 --steps 4 --trace "$OUT/trace-demo.json" > "$OUT/traces.txt" 2>&1
echo "demo trace rc $?" >> "$OUT/traces.txt"
for w in w-tiny w-moe-12-q4_k w-dense-q4_k; do
  [ $(left) -gt 30 ] || break
  timeout $(( $(left) - 10 )) fusegraph bench --workload $w --compare fused,graph --steps 10 --trace "$OUT/trace-$w.json" >> "$OUT/traces.txt" 2>&1
  echo "$w trace rc $? after $((SECONDS - S)) s" >> "$OUT/traces.txt"
done
grep -E "rc |error|wrote" "$OUT/traces.txt"
