#!/usr/bin/env bash
# One GPU call of the fourth session (x2 machine): GPU 0 runs the suite and the
# benchmarks, GPU 1 a compute-sanitizer tool over the whole suite (SAN_TOOL,
# default synccheck), each writing into $OUT.  bash scripts/gpu-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
t() { echo "[$((SECONDS - S)) s] $*"; }
T=$(command -v fusegraph_gpu_tests)
ngpu=$(nvidia-smi -L | wc -l)
if [ "$ngpu" -ge 2 ] && [ -n "${SAN_TOOL:-synccheck}" ]; then
  ( export CUDA_VISIBLE_DEVICES=1 FG_KERNEL_CACHE=/tmp/fgk1
    timeout $((D - 20)) bash scripts/gpu-sanitize.sh "${SAN_TOOL:-synccheck}" "${SAN_SHARD:-0}" "${SAN_SHARDS:-1}" "$T" \
      > "$OUT/san.txt" 2>&1; echo "exit $?" >> "$OUT/san.txt" ) &
  san=$!
fi
export CUDA_VISIBLE_DEVICES=0 FG_KERNEL_CACHE=/tmp/fgk0
timeout 300 "$T" ${SUITE_FILTER:+--gtest_filter=$SUITE_FILTER} > "$OUT/gpu.txt" 2>&1; t "suite rc $?"
grep -E "^\[  (PASSED|FAILED)|tests ran" "$OUT/gpu.txt" | head -30
{
  for w in w-tiny w-dense w-moe-12; do
    echo "== prev $w"; timeout 60 fusegraph-prev bench --workload $w --compare fused,unfused,graph --steps 50 2>&1 | grep -E "graph-"
    echo "== now $w"; timeout 60 fusegraph bench --workload $w --compare fused,unfused,graph --steps 50 2>&1 | grep -E "graph-|launches"
  done
} > "$OUT/bench.txt" 2>&1; t "bench"; cat "$OUT/bench.txt"
[ $((SECONDS - S)) -lt $((D - 150)) ] && { timeout 120 fg_bench_kernels --benchmark_filter='/(q4_k|q4_0|q8_0|q6_k|q4_1)/.*T1$' --table "$OUT/quant.md" > "$OUT/quant.txt" 2>&1; t "quant bench rc $?"; }
[ $((SECONDS - S)) -lt $((D - 100)) ] && { for w in w-dense w-moe-12; do timeout 80 fusegraph bench --workload $w --prefill 64,512 --steps 10 --warmup 2 --breakdown > "$OUT/prefill-$w.txt" 2>&1; t "prefill $w rc $?"; done; }
[ -n "${san:-}" ] && { wait $san; t "sanitizer done"; tail -3 "$OUT/san.txt"; }
t end
