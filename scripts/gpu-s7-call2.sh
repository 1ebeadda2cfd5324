#!/usr/bin/env bash
# The seventh session's second GPU call (one GPU): the quantised GPU tests with
# wide iq4_nl and q6_K on by default; W-dense q6_K / iq4_nl steps wide against
# narrow; then Nsight Compute over the T = 1 GEMVs of W-dense (q4_K, q4_0,
# q8_0 and f16 for contrast) to see why the quantised ones sit at 30-50 % of
# the bandwidth: where the warps stall, issue slots, bytes in flight.
#   bash scripts/gpu-s7-call2.sh DEADLINE_S
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
for w in w-dense-q6_k:FG_DEBUG_GEMV_WIDE_Q6K w-dense-q4_k_m:FG_DEBUG_GEMV_WIDE_Q6K w-dense-iq4_nl:FG_DEBUG_GEMV_WIDE_IQ4NL; do
  for e in 1 0; do
    [ $(left) -gt 230 ] || break 2
    echo "== ${w%%:*} ${w#*:}=$e"; env ${w#*:}=$e bench fusegraph bench --workload ${w%%:*}
  done
done 2>&1 | tee "$OUT/work.txt"
echo "[$((SECONDS - S)) s] work"
for q in q4_k q4_0 q8_0 f16; do
  [ $(left) -gt 40 ] || break
  timeout $(( $(left) > 110 ? 90 : $(left) - 20 )) ncu --clock-control none --set full -k regex:matmul \
    --launch-skip 4 --launch-count 1 -o "$OUT/ncu-gate_up-$q" \
    fg_bench_kernels --reps 1 --no-cublas --benchmark_filter="^matmul/w-dense/gate_up/$q/T1/" > "$OUT/ncu-$q.log" 2>&1
  echo "ncu $q rc $? after $((SECONDS - S)) s"
  ncu --import "$OUT/ncu-gate_up-$q.ncu-rep" --page details --print-units base > "$OUT/ncu-gate_up-$q.txt" 2>&1
  grep -E "Duration|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Executed Instructions  " "$OUT/ncu-gate_up-$q.txt" | head -12
done
