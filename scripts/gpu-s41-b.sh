#!/usr/bin/env bash
# The forty-first session's second call: the routing heads' blocks ranking
# the logits themselves (EmitOptions::routingHeadRanksLogits, topk.cuh
# topkRanksLogits; FG_DEBUG_HEAD_RANKS_LOGITS=0 the whole routing in every
# block; off by default until this call): its GPU tests (planted near ties and underflow, the MoE layers, the
# early experts that rank again), memcheck, then W-moe-12 q4_K and q8_0 steps
# each way, alternating.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s41-b.sh 400  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 "$T" --gtest_filter='GpuRoutingHeads.*:GpuEarlyExperts.*' > "$OUT/gtest.txt" 2>&1
echo "== heads tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E '^\[heads\]|^\[early' "$OUT/gtest.txt" | head -8
timeout 90 compute-sanitizer --tool memcheck "$T" --gtest_filter='GpuRoutingHeads.Ranked*' > "$OUT/memcheck.txt" 2>&1
echo "== memcheck (rc $?): $(summ "$OUT/memcheck.txt")"
for round in 1 2 3; do
  stepf w-moe-12-q4_k "FG_DEBUG_HEAD_RANKS_LOGITS=0"
  stepf w-moe-12-q4_k "FG_DEBUG_HEAD_RANKS_LOGITS=1"
done
for round in 1 2; do
  stepf w-moe-12-q8_0 "FG_DEBUG_HEAD_RANKS_LOGITS=0"
  stepf w-moe-12-q8_0 "FG_DEBUG_HEAD_RANKS_LOGITS=1"
done
STEP_TIMEOUT=120 stepf w-moe-12-q4_k "FG_DEBUG_HEAD_RANKS_LOGITS=1" --breakdown
grep -E "gated_matmul_id|matmul_id_sum_add" /tmp/step.txt | head -4
for v in 0 1; do
  [ "$(left)" -gt 60 ] || break
  FG_DEBUG_HEAD_RANKS_LOGITS=$v timeout 60 ncu --clock-control none -k regex:'^fg_fused_gated_matmul_id' \
    --launch-skip 4 --launch-count 3 --section SpeedOfLight \
    fusegraph bench --workload w-moe-12-q4_k --compare fused,eager --steps 1 --warmup 0 > "$OUT/ncu-head$v.txt" 2>&1
  echo "== ncu gated, ranks logits $v (rc $?): $(grep -E '^ +Duration' "$OUT/ncu-head$v.txt" | awk '{print $3}' | tr '\n' ' ')"
done
echo "call done after $((SECONDS - S)) s"
