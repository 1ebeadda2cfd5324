#!/usr/bin/env bash
# For the session after the twenty-ninth: why W-dense's flash prefill launch
# takes 53-56 µs in the prefill's replay but 23-24 under Nsight Compute
# (bench/RESULTS.md, twenty-ninth section), before rewriting the kernel.
# 1. The kernel alone, back to back in a graph (fg_bench_kernels' new
#    attention/*/prefill cases, T 512 and 2048), with and without rotating
#    the cache (its --reps), against the replay's figure.
# 2. Nsight Compute on the bench's launches (clocks as found) and on the
#    prefill's, side by side: duration, SM clock, achieved occupancy.
# 3. The prefill's launch list with and without the GEMMs' power draw in
#    front of the attention (FG_DEBUG_GEMM_PAIRS=0 changes nothing there; a
#    prefill of 64 tokens has no cuBLAS GEMMs at all and the same kernel
#    form above attentionPrefillMinTokens).
#   bash scripts/gpu-s29-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
timeout 120 fg_bench_kernels --no-cublas --benchmark_filter='attention/.*/prefill' --table /tmp/a.md > "$OUT/attn-prefill.txt" 2>&1
echo "kernels rc $?"; grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,6
timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__warps_active.avg.pct_of_peak_sustained_active \
  -k regex:fg_attention --launch-count 6 fg_bench_kernels --no-cublas --benchmark_filter='attention/w-dense/prefill/f16/T512' > "$OUT/ncu-bench.txt" 2>&1
grep -E "duration|per_second|warps_active" "$OUT/ncu-bench.txt" | head -18
timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__warps_active.avg.pct_of_peak_sustained_active \
  -k regex:fg_attention --launch-skip 32 --launch-count 6 fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 1 > "$OUT/ncu-prefill.txt" 2>&1
grep -E "duration|per_second|warps_active" "$OUT/ncu-prefill.txt" | head -18
for n in 512 64; do
  timeout 90 fusegraph bench --workload w-dense --prefill $n --steps 5 --warmup 2 --breakdown --breakdown-launches 16 > /tmp/b.txt 2>&1
  echo "== prefill $n"; grep -E "attention|^prefill_" /tmp/b.txt | head -6
done
echo "done after $((SECONDS - S)) s"
