#!/usr/bin/env bash
# One GPU call on the x2 machine (the fourth session's last, with the variants that
# settle what it left open): GPU 1 runs compute-sanitizer tools over the whole suite
# (the death test that faults the device on purpose excluded), GPU 0 the
# diagnostics, new tests and benchmarks; all into $OUT.
#   bash scripts/gpu-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-500}
t() { echo "[$((SECONDS - S)) s] $*"; }
T=$(command -v fusegraph_gpu_tests)
( export CUDA_VISIBLE_DEVICES=1 FG_KERNEL_CACHE=/tmp/fgk1
  for tool in ${SAN_TOOLS:-synccheck initcheck}; do
    left=$((D - 15 - (SECONDS - S))); [ $left -gt 30 ] || break
    GTEST_EXTRA=--gtest_filter=-GpuInputCheck.DeviceFaultIsSticky timeout $left \
      bash scripts/gpu-sanitize.sh $tool 0 1 "$T" > "$OUT/san-$tool.txt" 2>&1
    echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$tool.txt"
  done ) &
san=$!
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
# 1. The seed at which the fused graph disagreed with the reference, three ways.
FG_TEST_SEED=154801226 timeout 60 "$T" --gtest_filter='GpuDemo.TeacherForced*' > "$OUT/diag.txt" 2>&1; t "diag rc $?"
FG_GRAPH_COPIES=1 FG_TEST_SEED=154801226 timeout 40 "$T" --gtest_filter='GpuDemo.TeacherForced1000*' > "$OUT/diag-copies.txt" 2>&1; t "diag graph copies rc $?"
grep -hE "Failure|step [0-9]|worst|OK|FAILED" "$OUT"/diag*.txt | head -20
# 2. Tests new since the last call.
timeout 120 "$T" --gtest_filter='GpuQuantWorkload*:*Trace*:GpuSampling*:GpuDemo*:Fused/GpuFused.*rms_norm*:GpuQuant*' > "$OUT/new.txt" 2>&1; t "new tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran" "$OUT/new.txt" | head -20
# 3. Decode steps: previous build, now (default), now with the copies inside the graph (and
#    without PDL), now with the norm prologue.
{
  for w in w-tiny w-dense w-moe-12; do
    echo "== prev $w"; timeout 60 fusegraph-prev bench --workload $w --compare fused,unfused,graph --steps 50 2>&1 | grep -E "graph-"
    echo "== now $w"; timeout 60 fusegraph bench --workload $w --compare fused,unfused,graph,nopdl --steps 50 2>&1 | grep -E "graph-|launches"
    echo "== now-graphcopies $w"; FG_GRAPH_COPIES=1 timeout 60 fusegraph bench --workload $w --compare fused,graph,nopdl --steps 50 2>&1 | grep -E "graph-"
    echo "== now-normprologue $w"; timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 50 --enable-fusion rms_norm_matmul 2>&1 | grep -E "graph-"
  done
} > "$OUT/bench.txt" 2>&1; t "bench"; cat "$OUT/bench.txt"
{ for b in fusegraph-prev fusegraph; do echo "== $b"; timeout 60 $b bench --workload w-dense --compare fused,graph --breakdown --steps 10 2>&1 | sed -n '/per kernel family/,$p' | head -16; done; } > "$OUT/breakdown.txt" 2>&1; t breakdown
[ $((SECONDS - S)) -lt $((D - 110)) ] && { timeout 100 fg_bench_kernels --reps 5 --benchmark_filter='/(q4_k|q4_0|q8_0|q6_k)/T1|/f16/T1' --table "$OUT/quant.md" > "$OUT/quant.txt" 2>&1; t "quant kernels rc $?"; }
[ $((SECONDS - S)) -lt $((D - 60)) ] && { timeout 55 fusegraph bench --workload w-moe-12-q4_k --compare fused,graph --steps 30 > "$OUT/q-moe.txt" 2>&1; t "w-moe-12-q4_k rc $?"; grep -E "graph-|ideal" "$OUT/q-moe.txt"; }
[ $((SECONDS - S)) -lt $((D - 60)) ] && { timeout 55 fusegraph bench --workload w-dense-q4_k --compare fused,graph --steps 30 > "$OUT/q-dense.txt" 2>&1; t "w-dense-q4_k rc $?"; grep -E "graph-|ideal" "$OUT/q-dense.txt"; }
wait $san; t "sanitizers"; for f in "$OUT"/san-*.txt; do echo "$f: $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|exit' $f | tr '\n' ' ')"; done
