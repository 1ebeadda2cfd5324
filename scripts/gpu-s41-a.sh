#!/usr/bin/env bash
# The forty-first session's first call (written in the fortieth, whose device
# time ran out on refused starts): the ranked early form by the gated launch's
# bytes (FG_DEBUG_EARLY_RANKED_MIN_MB=20: W-moe-12 q8_0's 26.7 MB of selected
# gate|up a layer take it, q4_K's 14.2 MB not — q4_K is the control, the same
# plan), its GPU tests; the issues' workloads against their targets (the
# H200's: note the card); then Nsight Compute on the decode expert launches.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s41-a.sh 540  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
FG_DEBUG_EARLY_RANKED=1 timeout 100 "$T" --gtest_filter='GpuEarlyExperts.*:GpuRoutingHeads.*' > "$OUT/gtest.txt" 2>&1
echo "== early experts, ranked everywhere (rc $?): $(summ "$OUT/gtest.txt")"
for round in 1 2 3; do
  stepf w-moe-12-q8_0 "FG_DEBUG_EARLY_RANKED_MIN_MB=20"
  stepf w-moe-12-q8_0 ""
done
stepf w-moe-12-q4_k "FG_DEBUG_EARLY_RANKED_MIN_MB=20"
stepf w-moe-12-q4_k ""
for w in w-moe-12 w-tiny w-dense w-dense-q4_k; do stepf $w ""; done
STEP_TIMEOUT=120 stepf w-moe-48 ""
if [ "$(left)" -gt 150 ]; then
  timeout 120 ncu --clock-control none -k regex:'^fg_fused_(gated_matmul_id|matmul_id_sum_add)' \
    --launch-skip 4 --launch-count 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats \
    fusegraph bench --workload w-moe-12-q4_k --compare fused,eager --steps 1 --warmup 0 > "$OUT/ncu-q4k.txt" 2>&1
  echo "== ncu w-moe-12-q4_k (rc $?)"
  grep -E '^  fg_|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Warp Cycles Per Issued|No Eligible|stalled|spends' "$OUT/ncu-q4k.txt" | head -60
fi
echo "call done after $((SECONDS - S)) s"
