#!/usr/bin/env bash
# The second GPU call of the sixth session (x2 machine, or one GPU with the
# sanitizers last): x as one f16 in the quantised GEMVs (FG_DEBUG_GEMV_X_HALF)
# checked and timed against hi + lo, the seven newly enabled types timed,
# ggml-cuda's quantised steps beside ours, and memcheck / racecheck over the
# quantised GPU tests (the ones added or changed since the fifth session's
# whole-suite sanitizer runs).
#   mkdir -p .gpu/peers && cp ../shared/peers/* .gpu/peers/   (before bundling)
#   bash scripts/gpu-xhalf-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
t() { echo "[$((SECONDS - S)) s] $*"; }
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
Q='GpuQuant*:Types/GpuQuantWorkload*'
pids=()
san() { # GPU tool shard total
  ( export CUDA_VISIBLE_DEVICES=$1 FG_KERNEL_CACHE=/tmp/fgk$1 GTEST_EXTRA="--gtest_filter=$Q"
    timeout $((D - 12 - (SECONDS - S))) bash scripts/gpu-sanitize.sh $2 $3 $4 "$T" > "$OUT/san-$2-$3.txt" 2>&1
    echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$2-$3.txt" ) &
  pids+=($!)
}
# ggml-cuda builds on the CPUs while the tests run (about 4 minutes).
( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
gb=$!
if [ "$ngpu" -ge 2 ]; then san 1 memcheck 0 1; san 1 racecheck 0 1; fi
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
timeout 100 "$T" --gtest_filter="$Q" > "$OUT/tests.txt" 2>&1; t "quant tests rc $?"
FG_DEBUG_GEMV_X_HALF=1 timeout 100 "$T" --gtest_filter="$Q" > "$OUT/tests-xhalf.txt" 2>&1; t "quant tests, x half, rc $?"
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]|worst" "$OUT/tests.txt" "$OUT/tests-xhalf.txt" | head -50
{
  for v in "" --gemv-x-half; do
    echo "== kernels ${v:-hi+lo}"
    timeout 100 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter='w-dense/.*/(q4_k|q4_0|q8_0|q6_k)/T(1|8)$|w-moe/.*/q4_k/T1$' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
    grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2-4,6-8,11
  done
  echo "== kernels, the seven new types, T1"
  timeout 80 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='w-dense/(gate_up|down|lm_head)/(q5_0|q5_1|q5_k|q2_k|q3_k|iq4_nl|iq4_xs)/T1$' --table /tmp/n.md > /tmp/n.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/n.md | cut -d'|' -f2-4,6-8,11
} > "$OUT/kernels.txt" 2>&1; t kernels; cat "$OUT/kernels.txt"
wait $gb; t "ggml built: $(tail -1 /tmp/ggml-build.txt)"
{
  for w in dense-q4_k moe-12-q4_k dense-q4_0 dense-q8_0 dense-q6_k; do
    [ $(left) -gt 60 ] || break
    for e in 0 1; do
      echo "== w-$w xhalf=$e"; FG_DEBUG_GEMV_X_HALF=$e timeout 60 fusegraph bench --workload w-$w --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -3 /tmp/b.txt; grep -E "graph-|ideal" /tmp/b.txt
    done
    m=${w%%-*}; l=""; [ "$m" = moe ] && l="--layers 12"; q=${w##*-}; [ "$q" = q4_k ] && q=q4_K; [ "$q" = q6_k ] && q=q6_K
    echo "== ggml $m $l $q"; timeout 60 bash .gpu/peers/ggml-bench.sh --model $m $l --wtype $q --reps 100 2>&1 | grep RESULT
  done
} > "$OUT/work.txt" 2>&1; t work; cat "$OUT/work.txt"
if [ "$ngpu" -lt 2 ] && [ $(left) -gt 90 ]; then san 0 memcheck 0 1; fi
wait "${pids[@]}"; t sanitizers
for f in "$OUT"/san-*.txt; do [ -f "$f" ] && echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
