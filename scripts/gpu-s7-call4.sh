#!/usr/bin/env bash
# The seventh session's last GPU call (one GPU): Nsight Compute over one
# flash-attention prefill launch of W-dense (512 tokens; 110 us a layer after
# the cp.async staging: why), then the whole GPU suite at the final commit.
#   bash scripts/gpu-s7-call4.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 120 ncu --clock-control none --set full -k regex:attention --launch-count 1 -o "$OUT/ncu-flash" \
  fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 > "$OUT/ncu-flash.log" 2>&1
echo "ncu rc $? after $((SECONDS - S)) s"
ncu --import "$OUT/ncu-flash.ncu-rep" --page details --print-units base > "$OUT/ncu-flash.txt" 2>&1
grep -E "Duration|Grid Size|Block Size|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Waves" "$OUT/ncu-flash.txt" | head -16
timeout $(( $(left) - 10 )) "$T" > "$OUT/suite.txt" 2>&1
echo "suite rc $? after $((SECONDS - S)) s"
grep -cE "^\[       OK \]" "$OUT/suite.txt"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|SKIPPED \]" "$OUT/suite.txt" | head -20; tail -3 "$OUT/suite.txt"
