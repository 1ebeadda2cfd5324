#!/usr/bin/env bash
# The last GPU call of the sixth session (x2: GPU 1 runs the whole suite, then
# memcheck and racecheck over the tests added this session; GPU 0 the
# timings; one GPU: the suite first, the sanitizers if time is left).
# Timings, each beside its comparison in this call: the kernel table at T = 1
# (f16 and four block types), the decode step of every f16 workload now, now
# without fused.matmul_multi, and the session's first build (fusegraph-prev,
# main at a239731); the quantised workloads now and before; ggml-cuda.
#   mkdir -p .gpu/peers && cp ../shared/peers/* .gpu/peers/   (before bundling)
#   [PARTS="suite kernels work ggml san"] bash scripts/gpu-final-s6.sh DEADLINE_S
# PARTS names what runs (all by default).
set -uo pipefail
PARTS=${PARTS:-suite kernels work ggml san}
has() { [[ " $PARTS " == *" $1 "* ]]; }
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
t() { echo "[$((SECONDS - S)) s] $*"; }
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
NEW='GpuFused*matmul_multi*:GpuQuantGemv.Q4_0AndQ8_0Wide*:Types/GpuQuantWorkload*'
gb=""
if has ggml; then
  ( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
  gb=$!
fi
suite_then_san() { # GPU
  export CUDA_VISIBLE_DEVICES=$1 FG_KERNEL_CACHE=/tmp/fgk$1
  if has suite; then
    timeout 240 "$T" > "$OUT/suite.txt" 2>&1; echo "suite rc $? after $((SECONDS - S)) s" >> "$OUT/suite.txt"
  fi
  has san || return 0
  for tool in memcheck racecheck; do
    [ $(left) -gt 60 ] || break
    GTEST_EXTRA="--gtest_filter=$NEW" timeout $(( $(left) - 15 )) bash scripts/gpu-sanitize.sh $tool 0 1 "$T" > "$OUT/san-$tool.txt" 2>&1
    echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$tool.txt"
  done
}
if [ "$ngpu" -ge 2 ]; then suite_then_san 1 & sp=$!; else
  has suite && ( export CUDA_VISIBLE_DEVICES=0; timeout 240 "$T" > "$OUT/suite.txt" 2>&1; echo "suite rc $? after $((SECONDS - S)) s" >> "$OUT/suite.txt" ); sp=""
fi
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
has kernels && {
  echo "== kernels T1"
  timeout 100 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='^(matmul|fused.gated_matmul)/w-dense/.*/(f16|q4_k|q4_0|q8_0|q6_k)/T1' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2-4,6-8,11
} > "$OUT/kernels.txt" 2>&1; t kernels; cat "$OUT/kernels.txt"
bench() { timeout 60 "$@" --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt; grep -E "graph-fused|launches" /tmp/b.txt; }
has work && {
  for w in ${FWORK:-w-tiny w-dense w-moe-12}; do
    echo "== $w now"; bench fusegraph bench --workload $w
    echo "== $w now, no matmul_multi"; bench fusegraph bench --workload $w --disable-fusion matmul_multi
    echo "== $w prev"; bench fusegraph-prev bench --workload $w
  done
  for w in ${QWORK:-w-dense-q4_0 w-dense-q8_0 w-dense-q4_k w-moe-12-q4_k}; do
    [ $(left) -gt 70 ] || break
    echo "== $w now"; bench fusegraph bench --workload $w
    echo "== $w prev"; bench fusegraph-prev bench --workload $w
  done
} > "$OUT/work.txt" 2>&1; t work; cat "$OUT/work.txt"
[ -n "$gb" ] && { wait $gb; t "$(tail -1 /tmp/ggml-build.txt)"; }
has ggml && {
  for a in "dense f16" "moe --layers 12 f16" "tiny f16" "dense q4_0" "dense q8_0" "dense q4_K" "moe --layers 12 q4_K"; do
    [ $(left) -gt 25 ] || break
    set -- $a; q=${@: -1}; m=${*%% *}; rest=${*#* }; rest=${rest% *}; [ "$rest" = "$q" ] && rest=""
    echo "== ggml $a"; timeout 40 bash .gpu/peers/ggml-bench.sh --model $m $rest --wtype $q --reps 100 2>&1 | grep RESULT
  done
} > "$OUT/ggml.txt" 2>&1; t ggml; cat "$OUT/ggml.txt"
[ -n "$sp" ] && wait $sp
t done
[ -f "$OUT/suite.txt" ] && grep -E "^\[  (PASSED|FAILED)|FAILED  \]|suite rc" "$OUT/suite.txt" | head -20
for f in "$OUT"/san-*.txt; do [ -f "$f" ] && echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
