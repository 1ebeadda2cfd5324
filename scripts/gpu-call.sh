#!/usr/bin/env bash
# One GPU call on the x2 machine: GPU 1 runs the four compute-sanitizer tools over the whole
# suite at once (racecheck, the slowest, in SAN_RACE_SHARDS shards; each process its own log),
# GPU 0 the benchmarks, then the whole suite plain; everything into $OUT.
#   bash scripts/gpu-call.sh DEADLINE_S
# SAN_TOOLS (default "memcheck initcheck synccheck racecheck") picks the tools; BENCH=0 skips
# the benchmarks (a validation-only call).
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-500}
t() { echo "[$((SECONDS - S)) s] $*"; }
T=$(command -v fusegraph_gpu_tests)
nr=${SAN_RACE_SHARDS:-3}
pids=()
for tool in ${SAN_TOOLS:-memcheck initcheck synccheck racecheck}; do
  n=1; [ "$tool" = racecheck ] && n=$nr
  for ((i = 0; i < n; i++)); do
    ( export CUDA_VISIBLE_DEVICES=${SAN_GPU:-1} FG_KERNEL_CACHE=/tmp/fgk1
      timeout $((D - 20)) bash scripts/gpu-sanitize.sh $tool $i $n "$T" > "$OUT/san-$tool-$i.txt" 2>&1
      echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$tool-$i.txt" ) &
    pids+=($!)
  done
done
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
left() { echo $((D - (SECONDS - S))); }
if [ "${BENCH:-1}" = 1 ]; then
  {
    for w in w-tiny w-dense w-moe-12; do
      echo "== prev $w"; timeout 60 fusegraph-prev bench --workload $w --compare fused,unfused,graph --steps 50 2>&1 | grep -E "graph-"
      echo "== now $w"; timeout 60 fusegraph bench --workload $w --compare fused,unfused,graph,nopdl --steps 50 2>&1 | grep -E "graph-|launches"
      echo "== now-graphcopies $w"; FG_GRAPH_COPIES=1 timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 50 2>&1 | grep -E "graph-"
      echo "== now-normprologue $w"; timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 50 --enable-fusion rms_norm_matmul 2>&1 | grep -E "graph-"
    done
  } > "$OUT/bench.txt" 2>&1; t "bench"; cat "$OUT/bench.txt"
  { for b in fusegraph-prev fusegraph; do echo "== $b"; timeout 60 $b bench --workload w-dense --compare fused,graph --breakdown --steps 10 2>&1 | sed -n '/per kernel family/,$p' | head -16; done; } > "$OUT/breakdown.txt" 2>&1; t breakdown
  ${EXTRA_GPU0:-true}
  [ $(left) -gt 110 ] && { timeout 100 fg_bench_kernels --reps 5 --benchmark_filter="${QFILTER:-/(q4_k|q4_0|q8_0|q6_k)/T1|/f16/T1}" --table "$OUT/quant.md" > "$OUT/quant.txt" 2>&1; t "quant kernels rc $?"; }
  for w in ${QWORK:-w-dense-q4_k w-moe-12-q4_k}; do
    [ $(left) -gt 60 ] && { timeout 55 fusegraph bench --workload $w --compare fused,graph --steps 30 > "$OUT/q-$w.txt" 2>&1; t "$w rc $?"; grep -E "graph-|ideal" "$OUT/q-$w.txt"; }
  done
fi
[ $(left) -gt 40 ] && { timeout $(( $(left) - 30 )) "$T" > "$OUT/suite.txt" 2>&1; t "suite rc $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran|FAILED  \]" "$OUT/suite.txt" | head -20; }
wait "${pids[@]}"; t "sanitizers"
for f in "$OUT"/san-*.txt; do echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|exit|FAILED  \]' $f | tr '\n' ' ')"; done
