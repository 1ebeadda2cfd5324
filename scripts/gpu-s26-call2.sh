#!/usr/bin/env bash
# Twenty-sixth session, call 2: the routing heads (EmitOptions::routingHeads,
# FG_DEBUG_ROUTING_HEADS=1: one token's topk_moe run by every block of the
# gated expert GEMV) and the local GEMV tails made to trigger first where
# their rows feed the attention. Tests (bit identity, the CPU), the MoE and
# usual GPU sets with the heads on, the PDL delay build, memcheck, then steps
# off / on alternating, and W-moe-12 q4_K's breakdown with the heads.
#   bash scripts/gpu-s26-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_brief=1 --gtest_filter='GpuRoutingHeads.*:GpuGemvTails.Local*' > "$OUT/heads.txt" 2>&1
echo "heads + local tails tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/heads.txt")"
grep -E '\[(heads|tails)\]' "$OUT/heads.txt"
F='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantMoeWorkload*:GpuFused*topk*:GpuFused*gated_matmul_id*:GpuFused*matmul_id_sum_add*:GpuGreedyToken*'
FG_DEBUG_ROUTING_HEADS=1 FG_KERNEL_CACHE=/tmp/fgk-h timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-on.txt" 2>&1
echo "tests with heads rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-on.txt")"
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 80 $T --gtest_brief=1 \
  --gtest_filter='GpuRoutingHeads.*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 100 compute-sanitizer --tool memcheck $T --gtest_filter='GpuRoutingHeads.*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $? at $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2; do
  for w in w-moe-12-q4_k w-moe-12; do
    stepf $w "FG_DEBUG_ROUTING_HEADS=0"
    stepf $w "FG_DEBUG_ROUTING_HEADS=1"
  done
  for w in w-tiny w-dense; do
    stepf $w "FG_DEBUG_GEMV_LOCAL_TAILS=0"
    stepf $w "FG_DEBUG_GEMV_LOCAL_TAILS=1"
  done
done
[ "$(left)" -gt 50 ] && FG_DEBUG_ROUTING_HEADS=1 timeout 45 fusegraph bench --workload w-moe-12-q4_k \
  --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-moe-heads.txt" 2>&1
[ "$(left)" -gt 50 ] && FG_DEBUG_ROUTING_HEADS=0 timeout 45 fusegraph bench --workload w-moe-12-q4_k \
  --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-moe.txt" 2>&1
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
