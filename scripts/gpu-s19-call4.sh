#!/usr/bin/env bash
# For the nineteenth session's fourth GPU call (written in the eighteenth as its second):
# decode attention's cluster form (the eighteenth session's default) in
# steps it was not timed in — W-tiny, W-moe-12 f16 — against the split form
# (FG_DEBUG_ATTN_CLUSTER=0); its tiles of 3 and 4 steps (1025 live keys in
# one round, FG_DEBUG_ATTN_CLUSTER_STEPS); q's rope in its q load
# (--enable-fusion rope_attention, a launch a layer fewer); then W-dense
# q6_K's breakdown (ran past 100 s in the eighteenth session).
#   bash scripts/gpu-s19-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
{
stepf w-dense-q4_k ""
stepf w-dense-q4_k "FG_DEBUG_ATTN_CLUSTER_STEPS=3"
stepf w-dense-q4_k "FG_DEBUG_ATTN_CLUSTER_STEPS=4"
stepf w-dense-q4_k "FG_DEBUG_ATTN_CLUSTER=0"
stepf w-dense-q4_k "" --enable-fusion rope_attention
stepf w-dense-q4_k ""
stepf w-tiny ""
stepf w-tiny "FG_DEBUG_ATTN_CLUSTER=0"
stepf w-moe-12 ""
stepf w-moe-12 "FG_DEBUG_ATTN_CLUSTER=0"
} 2>&1 | tee "$OUT/steps.txt"
if [ "$(left)" -gt 100 ]; then
  timeout $(( $(left) - 10 )) fusegraph bench --workload w-dense-q6_k --compare fused,graph --steps 3 --warmup 1 \
    --breakdown > "$OUT/q6k-breakdown.txt" 2>&1
  echo "q6_K breakdown rc $?"
fi
echo "done after $((SECONDS - S)) s"
