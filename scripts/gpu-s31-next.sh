#!/usr/bin/env bash
# Superseded (thirty-second session): both forms it times became the only
# forms and their FG_DEBUG switches were removed; see scripts/gpu-s32-b.sh.
# For the session after the thirty-first: what was written after its last
# call, in two parts (a W-moe-12 q4_K prefill run takes ~80 s on this machine,
# most of it quantising the workload's weights on the CPU: thirty-first
# session, calls 3-4).
#   part 1: the quantised GPU tests with q4_K / q5_K scales by one byte
#           permute and f16x2 arithmetic (FG_DEBUG_K4_SCALE_PERMUTE=1, opt-in:
#           gemv.cuh, fg_k4_scale_min, fg_k4_header), the grouped-expert tests
#           in the shared-memory form (FG_DEBUG_MOE_LDSM=1, opt-in: ldmatrix
#           fragments, 16-byte x-tile stores), then W-moe-12 q4_K's 512-token
#           prefill in three forms: default, permute scales, shared-memory form.
#   part 2: the same three again, W-moe-12 f16 with and without ldmatrix,
#           W-dense q4_K (prefill and decode) with both scale decodes, and
#           Nsight Compute's stall reasons for the flash prefill.
#   bash scripts/gpu-s31-next.sh PART DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
PART=${1:-1}
D=${2:-560}
source scripts/gpu-call-lib.sh
moe3() {
  for e in "" "FG_DEBUG_K4_SCALE_PERMUTE=1" "FG_DEBUG_MOE_LDSM=1"; do
    pre w-moe-12-q4_k "$e" --steps 5 --warmup 2 --breakdown
    grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  done
}
if [ "$PART" = 1 ]; then
  FG_DEBUG_K4_SCALE_PERMUTE=1 timeout 150 fusegraph_gpu_tests --gtest_filter='GpuQuantGemv.*:GpuGroupedExpert.Skipped*:GpuGroupedExpert.Zero*:GpuPrefillThenDecode.Quantised*:*GpuFused*q4_k*' > "$OUT/gtest.txt" 2>&1
  echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
  FG_DEBUG_MOE_LDSM=1 timeout 120 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert.Skipped*:GpuGroupedExpert.Zero*:GpuGroupedExpert.AllPairs*:GpuGroupedExpert.OneX*:GpuGroupedExpertReplay*:GpuQuantGemv.GroupedExpert*' > "$OUT/gtest-ldsm.txt" 2>&1
  echo "== tests, ldmatrix (rc $?): $(summ "$OUT/gtest-ldsm.txt")"
  moe3
else
  moe3
  for e in "" "FG_DEBUG_MOE_LDSM=1"; do
    pre w-moe-12 "$e" --steps 5 --warmup 2 --breakdown
    grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  done
  for e in "" "FG_DEBUG_K4_SCALE_PERMUTE=1"; do
    pre w-dense-q4_k "$e" --steps 5 --warmup 2 --breakdown
    grep -E "^  (matmul|fused.matmul_add|fused.gated_gemm) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
    stepf w-dense-q4_k "$e"
  done
  M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
  if [ "$(left)" -gt 60 ]; then
    timeout 100 ncu --clock-control none --metrics $M -k regex:fg_attention --launch-skip 20 --launch-count 1 fusegraph bench --workload w-dense --prefill 2048 --ctx 4096 --steps 1 --warmup 0 > $OUT/ncu-flash.txt 2>&1
    echo "== ncu flash (rc $?)"; grep -E "^\s+(gpu__|smsp__|launch__|sm__)" $OUT/ncu-flash.txt | awk '{print $1, $NF}' | tr '\n' ';'; echo
  fi
fi
echo "call done after $((SECONDS - S)) s"
