#!/usr/bin/env bash
# One GPU call on the x2 machine for the quantised GEMV work (fifth session):
# GPU 0 runs the quantised tests, the kernel benchmark (whole-super-block q4_K
# decoder against the narrow one, f16 beside them), the quantised workloads
# (now and FG_DEBUG_GEMV_NARROW_QUANT=1), one Nsight Compute profile, then a
# racecheck shard; GPU 1 runs memcheck and initcheck over the suite in shards.
#   bash scripts/gpu-quant-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-540}
t() { echo "[$((SECONDS - S)) s] $*"; }
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
pids=()
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
# The sanitizer shards: on GPU 1 from the start (x2), or on GPU 0 after the
# timings (one GPU: nothing runs beside the benchmarks).
sanitize() {
  for job in ${SAN_JOBS:-memcheck:0:2 memcheck:1:2 initcheck:0:2 initcheck:1:2}; do
    IFS=: read -r tool i n <<< "$job"
    ( export CUDA_VISIBLE_DEVICES=$1 FG_KERNEL_CACHE=/tmp/fgk$1
      timeout $((D - 15 - (SECONDS - S))) bash scripts/gpu-sanitize.sh $tool $i $n "$T" > "$OUT/san-$tool-$i.txt" 2>&1
      echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$tool-$i.txt" ) &
    pids+=($!)
  done
}
[ "$ngpu" -ge 2 ] && sanitize 1
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
timeout 150 "$T" --gtest_filter="${TESTS:-GpuQuant*:Types/GpuQuantWorkload*}" > "$OUT/tests.txt" 2>&1; t "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|worst" "$OUT/tests.txt" | head -20
{
  echo "== kernels now"
  timeout 120 fg_bench_kernels --reps 5 --benchmark_filter="${QFILTER:-/q4_k/T|/f16/T1}" --table /tmp/q-now.md > /tmp/q-now.txt 2>&1; echo "rc $?"; cat /tmp/q-now.md
  echo "== kernels narrow"
  timeout 90 fg_bench_kernels --reps 5 --gemv-narrow-quant --no-cublas --benchmark_filter="${QFILTER2:-/q4_k/T1}" --table /tmp/q-old.md > /tmp/q-old.txt 2>&1; echo "rc $?"; cat /tmp/q-old.md
} > "$OUT/kernels.txt" 2>&1; t kernels; grep -E "q4_k|rc" "$OUT/kernels.txt" | head -60
{
  for w in ${QWORK:-w-dense-q4_k w-moe-12-q4_k w-dense-q4_k_m}; do
    [ $(left) -gt 120 ] || break
    echo "== now $w"; timeout 50 fusegraph bench --workload $w --compare fused,graph --steps 30 --breakdown 2>&1 | grep -E "graph-|ideal|^  [a-z]"
    echo "== narrow $w"; FG_DEBUG_GEMV_NARROW_QUANT=1 timeout 50 fusegraph bench --workload $w --compare fused,graph --steps 30 2>&1 | grep -E "graph-"
  done
} > "$OUT/work.txt" 2>&1; t work; cat "$OUT/work.txt"
if [ $(left) -gt 150 ] && command -v ncu > /dev/null; then
  timeout 100 ncu --clock-control none --kernel-name regex:matmul --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    fg_bench_kernels --reps 1 --no-cublas --benchmark_filter='matmul/w-dense/lm_head/q4_k/T1' > "$OUT/ncu.txt" 2>&1
  t "ncu rc $?"
fi
if [ "$ngpu" -lt 2 ]; then
  sanitize 0
elif [ $(left) -gt 60 ]; then
  timeout $(( $(left) - 25 )) bash scripts/gpu-sanitize.sh racecheck 0 3 "$T" > "$OUT/san-racecheck-0.txt" 2>&1
  echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-racecheck-0.txt"
fi
wait "${pids[@]}"; t "sanitizers"
for f in "$OUT"/san-*.txt; do echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
