#!/usr/bin/env bash
# The first GPU call of the next session (written at the end of the fifth):
# validate and time the opt-in q4_K form DecQ4_KS against DecQ4_KW, and finish
# issue 10's sanitizers (racecheck shard 0 of 3 and synccheck over the whole
# suite, each with a GPU of its own on the x2 machine; on one GPU after the
# timings). The bundle may carry .gpu/models (qwen3-q8_0.gguf and prompt.txt
# from tests/models/gen_models.py, written here): GpuQuantModel then runs.
#   bash scripts/gpu-next-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
t() { echo "[$((SECONDS - S)) s] $*"; }
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
[ -f .gpu/models/prompt.txt ] && export FG_MODEL_DIR=$PWD/.gpu/models
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
san() {
  ( export CUDA_VISIBLE_DEVICES=$1 FG_KERNEL_CACHE=/tmp/fgk$1
    timeout $((D - 15 - (SECONDS - S))) bash scripts/gpu-sanitize.sh $2 $3 $4 "$T" > "$OUT/san-$2-$3.txt" 2>&1
    echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$2-$3.txt" ) &
  pids+=($!)
}
pids=()
[ "$ngpu" -ge 2 ] && { san 1 racecheck 0 3; san 1 synccheck 0 1; }
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
timeout 120 "$T" --gtest_filter='GpuQuantGemv.*:GpuQuantModel.*:Types/GpuQuantWorkload*' > "$OUT/tests.txt" 2>&1; t "tests rc $?"
FG_DEBUG_GEMV_WIDE_SCALED=1 timeout 60 "$T" --gtest_filter='Types/GpuQuantWorkload*' >> "$OUT/tests.txt" 2>&1; t "scaled workload tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|worst|actual" "$OUT/tests.txt" | head -30
{
  for v in "" --gemv-wide-scaled; do
    echo "== kernels ${v:-wide}"
    timeout 90 fg_bench_kernels --reps 5 --no-cublas $v --benchmark_filter='/q4_k/T(1|2|8)' --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
    grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2-4,6-8,11
  done
  for w in w-moe-12-q4_k w-dense-q4_k; do
    for e in 0 1; do
      echo "== $w scaled=$e"; FG_DEBUG_GEMV_WIDE_SCALED=$e timeout 75 fusegraph bench --workload $w --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -3 /tmp/b.txt; grep -E "graph-|ideal" /tmp/b.txt
    done
  done
} > "$OUT/bench.txt" 2>&1; t bench; cat "$OUT/bench.txt"
if [ "$ngpu" -ge 2 ]; then
  timeout $(( $(left) - 20 )) "$T" > "$OUT/suite.txt" 2>&1; t "whole suite rc $?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$OUT/suite.txt" | head -20
elif [ $(left) -gt 120 ]; then san 0 racecheck 0 3; fi
wait "${pids[@]}"; t sanitizers
for f in "$OUT"/san-*.txt; do [ -f "$f" ] && echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
