#!/usr/bin/env bash
# The fortieth session's third call: Nsight Compute on W-moe-12 q4_K's decode
# expert launches (the gated DP4A experts with the routing head, the down
# projection with the sum and residual: 40 % of the step at 33-44 % of their
# bytes), never profiled before: where their warps stall. One layer's pair
# (after skipping two layers' of each), eager, KV 1024.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s40-c.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
for w in w-moe-12-q4_k w-moe-12; do
  [ "$(left)" -gt 90 ] || break
  timeout 120 ncu --clock-control none -k regex:'^fg_fused_(gated_matmul_id|matmul_id_sum_add)' \
    --launch-skip 4 --launch-count 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats \
    fusegraph bench --workload $w --compare fused,eager --steps 1 --warmup 0 > "$OUT/ncu-$w.txt" 2>&1
  echo "== ncu $w (rc $?)"
  grep -E '^  fg_|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|L2 Hit|Shared Memory Configuration Size|Dynamic Shared|Static Shared|stalled|spends' "$OUT/ncu-$w.txt" | head -70
done
echo "call done after $((SECONDS - S)) s"
