#!/usr/bin/env bash
# The first GPU call of the next session (written at the end of the sixth):
# the wide GEMVs' warp rule (16 warps per SM, changed after the sixth
# session's last call) checked by the quantised GPU tests and timed against
# the old target (FG_DEBUG_GEMV_WIDE_WARP_TARGET=32) on the quantised
# workloads; initcheck and synccheck over the tests the sixth session added
# (memcheck and racecheck passed on them); the opt-in wide iq4_nl and q6_K
# decoders' tests (GpuQuantGemv.IQ4_NLWideEveryForm, Q6_KWideEveryForm, in
# the quantised tests) and their kernels against the narrow ones, q6_K also
# on its workload; ggml-cuda's f16 steps beside ours.
# x2: GPU 1 runs the tests and sanitizers, GPU 0 the timings; one GPU: in turn.
#   mkdir -p .gpu/peers && cp ../shared/peers/* .gpu/peers/   (before bundling)
#   bash scripts/gpu-next-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
t() { echo "[$((SECONDS - S)) s] $*"; }
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
NEW='*GpuFused*matmul_multi*:GpuQuantGemv.Q4_0AndQ8_0Wide*:Types/GpuQuantWorkload*'
[ -f .gpu/models/prompt.txt ] && export FG_MODEL_DIR=$PWD/.gpu/models
( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
gb=$!
checks() { # GPU
  export CUDA_VISIBLE_DEVICES=$1 FG_KERNEL_CACHE=/tmp/fgk$1
  timeout 200 "$T" --gtest_filter='GpuQuant*:Types/GpuQuantWorkload*' > "$OUT/tests.txt" 2>&1
  echo "quant tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
  # Issue 16: the Python module (built here for 3.12 by python-module-for.sh)
  # with DLPack into torch, and Chrome traces of real steps for the README.
  [ -d .gpu/python ] && FG_PYTHON_MODULE_DIR=.gpu/python timeout 150 bash scripts/gpu-python.sh > "$OUT/python.txt" 2>&1
  echo "python rc $? after $((SECONDS - S)) s" >> "$OUT/python.txt"
  timeout 60 fusegraph run demo --device cuda --prompt-ids 1,2,3 --steps 4 --trace "$OUT/trace-demo.json" > "$OUT/traces.txt" 2>&1
  echo "demo trace rc $?" >> "$OUT/traces.txt"
  for w in w-tiny w-moe-12-q4_k w-dense-q4_k; do
    [ $(left) -gt 90 ] || break
    timeout 80 fusegraph bench --workload $w --compare fused,graph --steps 10 --trace "$OUT/trace-$w.json" >> "$OUT/traces.txt" 2>&1
    echo "$w trace rc $? after $((SECONDS - S)) s" >> "$OUT/traces.txt"
  done
  for tool in initcheck synccheck; do
    [ $(left) -gt 60 ] || break
    GTEST_EXTRA="--gtest_filter=$NEW" timeout $(( $(left) - 15 )) bash scripts/gpu-sanitize.sh $tool 0 1 "$T" > "$OUT/san-$tool.txt" 2>&1
    echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$tool.txt"
  done
}
if [ "$ngpu" -ge 2 ]; then checks 1 & cp=$!; else checks 0; cp=""; fi
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
bench() { timeout 60 "$@" --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt; grep -E "graph-fused" /tmp/b.txt; }
{
  for w in w-dense-q4_k w-dense-q4_0 w-dense-q8_0 w-moe-12-q4_k; do
    for e in 16 32; do echo "== $w warp target $e"; FG_DEBUG_GEMV_WIDE_WARP_TARGET=$e bench fusegraph bench --workload $w; done
  done
  for w in w-tiny w-dense w-moe-12; do echo "== $w"; bench fusegraph bench --workload $w; done
  for v in "" "--gemv-wide-iq4nl --gemv-wide-q6k"; do
    echo "== iq4_nl, q6_K kernels ${v:-narrow}"
    timeout 60 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter='^(matmul|fused.gated_matmul)/w-dense/.*/(iq4_nl|q6_k)/T1' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
    grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2-4,6-8,11
  done
  for e in 0 1; do echo "== w-dense-q6_k wide q6_K $e"; FG_DEBUG_GEMV_WIDE_Q6K=$e bench fusegraph bench --workload w-dense-q6_k; done
} > "$OUT/work.txt" 2>&1; t work; cat "$OUT/work.txt"
wait $gb; t "$(tail -1 /tmp/ggml-build.txt)"
for a in "dense f16" "moe --layers 12 f16" "tiny f16"; do
  [ $(left) -gt 25 ] || break
  set -- $a; echo "== ggml $a"; timeout 40 bash .gpu/peers/ggml-bench.sh --model $1 ${@:2:$(($# - 2))} --wtype ${@: -1} --reps 100 2>&1 | grep RESULT
done
[ -n "$cp" ] && wait $cp
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc |worst" "$OUT/tests.txt" | head -30
tail -4 "$OUT/python.txt"; grep -E "rc |error" "$OUT/traces.txt"
for f in "$OUT"/san-*.txt; do [ -f "$f" ] && echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
