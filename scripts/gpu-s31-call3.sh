#!/usr/bin/env bash
# Thirty-first session, call 3: the grouped expert GEMM's warps skip the mmas
# of m tiles past their tile's rows (EmitOptions::groupedExpertSkipRows, on;
# FG_DEBUG_MOE_SKIP_ROWS=0 off) — the GPU tests at the default, then W-moe-12's
# 512-token prefill (q4_K, f16, f16 with 64-row gate|up tiles, q4_K with
# one row's step a thread in gate|up too) on and off,
# alternating, and the 2048-token one.
#   bash scripts/gpu-s31-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 200 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert*:GpuQuantGemv.GroupedExpert*:*GpuQuantMoeWorkload*:GpuPrefillThenDecode*:*GpuFused*matmul_id*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
for round in 1 2; do
  for w in w-moe-12-q4_k w-moe-12; do
    for e in "" "FG_DEBUG_MOE_SKIP_ROWS=0"; do
      pre $w "$e" --steps 5 --warmup 2 --breakdown
      grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
    done
  done
  pre w-moe-12 "FG_DEBUG_MOE_ROWS=64" --steps 5 --warmup 2 --breakdown
  grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  pre w-moe-12-q4_k "FG_DEBUG_MOE_QROW=1" --steps 5 --warmup 2 --breakdown
  grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
done
for e in "" "FG_DEBUG_MOE_SKIP_ROWS=0"; do
  for w in w-moe-12 w-moe-12-q4_k; do
    PRE=2048 pre $w "$e" --steps 3 --warmup 1 --ctx 4096 --breakdown
    grep -E "^  (fused.gated_matmul_id|matmul_id) " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  done
done
# Nsight Compute's stall reasons for the flash prefill at 2048 tokens (call 1's
# regex missed: the kernel is named fg_attention_*).
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__cycles_elapsed.avg.per_second,sm__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__warp_issue_stalled_selected_per_warp_active.pct,smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed_op_shared_ld.sum
if [ "$(left)" -gt 60 ]; then
  timeout 100 ncu --clock-control none --metrics $M -k regex:fg_attention --launch-skip 20 --launch-count 1 fusegraph bench --workload w-dense --prefill 2048 --ctx 4096 --steps 1 --warmup 0 > $OUT/ncu-flash.txt 2>&1
  echo "== ncu flash (rc $?)"; grep -E "^\s+(gpu__|smsp__|launch__|sm__|l1tex__)" $OUT/ncu-flash.txt | awk '{print $1, $NF}' | tr '\n' ';'; echo
fi
echo "call done after $((SECONDS - S)) s"
