#!/usr/bin/env bash
# The thirty-ninth session's fifth call: the expert down projection reading
# its ids and routing weights and loading its first rows before its
# programmatic-launch wait where the lowering proves their writers finished
# (EmitOptions::earlyExperts, FG_DEBUG_EARLY_EXPERTS=1 against 0;
# codegen/cuda/EarlyExperts.h). Tests (and again with every kernel's tail
# delayed after its trigger: a read before the writer finished would show),
# (memcheck with MEMCHECK=1), then steps each way: W-moe-12 f16 and q4_K
# (with the routing heads the down projection ranks the logits again), three
# rounds; q8_0, q4_0; q4_K without heads; breakdowns.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s39-e.sh 420  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-420}
source scripts/gpu-call-lib.sh
F='GpuEarlyExperts.*:GpuMoeSumFloat.*:GpuRoutingHeads.*:GpuQuantMoeWorkload.*:*GpuFused*matmul_id_sum_add*:*GpuFused*gated_matmul_id*'
timeout 150 "$T" --gtest_filter="$F" > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[early\]|^\[  FAILED|Failure" "$OUT/gtest.txt" | head -8
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 "$T" --gtest_brief=1 \
  --gtest_filter='GpuEarlyExperts.*:GpuMoeSumFloat.*' > "$OUT/delay.txt" 2>&1
echo "== delayed tails (rc $?): $(summ "$OUT/delay.txt")"
if [ "${MEMCHECK:-0}" = 1 ]; then
  timeout 100 compute-sanitizer --tool memcheck "$T" --gtest_filter='GpuEarlyExperts.*' > "$OUT/memcheck.txt" 2>&1
  echo "== memcheck (rc $?): $(summ "$OUT/memcheck.txt")"
fi
for round in 1 2 3; do
  stepf w-moe-12 "FG_DEBUG_EARLY_EXPERTS=1"
  stepf w-moe-12 "FG_DEBUG_EARLY_EXPERTS=0"
  stepf w-moe-12-q4_k "FG_DEBUG_EARLY_EXPERTS=1"
  stepf w-moe-12-q4_k "FG_DEBUG_EARLY_EXPERTS=0"
done
for w in w-moe-12-q8_0 w-moe-12-q4_0; do
  stepf $w "FG_DEBUG_EARLY_EXPERTS=1"
  stepf $w "FG_DEBUG_EARLY_EXPERTS=0"
done
stepf w-moe-12-q4_k "FG_DEBUG_ROUTING_HEADS=0 FG_DEBUG_EARLY_EXPERTS=1"
for w in w-moe-12 w-moe-12-q4_k; do
  for f in "FG_DEBUG_EARLY_EXPERTS=1" "FG_DEBUG_EARLY_EXPERTS=0"; do
    [ "$(left)" -gt 50 ] || break
    env $f timeout 45 fusegraph bench --workload $w --compare fused,graph --steps 10 --breakdown > /tmp/bd.txt 2>&1
    echo "== breakdown $w $f (rc $?)"; cp /tmp/bd.txt "$OUT/breakdown-$w-${f#*=}.txt"
    grep -E "gated_matmul_id|matmul_id_sum_add|topk|^graph" /tmp/bd.txt | head -5
  done
done
echo "call done after $((SECONDS - S)) s"
