#!/usr/bin/env bash
# Thirty-first session, call 1: the thirtieth session's unrun checks
# (gpu-s30-next.sh: `bench --prefill N --kv S`, the prefill tests), then where
# W-moe-12's 512-token prefill goes (f16, q4_K) and Nsight Compute over its
# grouped expert GEMMs and over the flash prefill at 2048 tokens.
#   bash scripts/gpu-s31-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
D=${1:-560}
bash scripts/gpu-s30-next.sh 300
source .gpu/env.sh
source scripts/gpu-call-lib.sh
for w in w-moe-12 w-moe-12-q4_k; do
  pre $w "" --steps 5 --warmup 2 --breakdown
  grep -E "^  (fused|matmul|attention)" /tmp/pre.txt | head -12
done
M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__cycles_elapsed.avg.per_second,sm__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
ncuq() {
  local tag="$1" k="$2"; shift 2
  [ "$(left)" -gt 60 ] || { echo "skipped ncu $tag"; return; }
  timeout 100 ncu --clock-control none --metrics $M -k regex:$k --launch-count 2 "$@" > $OUT/ncu-$tag.txt 2>&1
  echo "== ncu $tag (rc $?)"; grep -E "^\s+(gpu__|smsp__|dram__|lts__|launch__|sm__|l1tex__)" $OUT/ncu-$tag.txt | head -22 | awk '{print $1, $NF}' | tr '\n' ';'; echo
}
ncuq moe-q4k-gu gated_matmul_id fusegraph bench --workload w-moe-12-q4_k --prefill 512 --steps 1 --warmup 0
ncuq moe-q4k-down 'fg_matmul_id' fusegraph bench --workload w-moe-12-q4_k --prefill 512 --steps 1 --warmup 0
ncuq moe-f16-gu gated_matmul_id fusegraph bench --workload w-moe-12 --prefill 512 --steps 1 --warmup 0
ncuq flash2048 fg_fused_attention fusegraph bench --workload w-dense --prefill 2048 --ctx 4096 --steps 1 --warmup 0
echo "call done after $((SECONDS - S)) s"
