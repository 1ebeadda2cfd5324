#!/usr/bin/env bash
# The twenty-fourth session's third GPU call. Decode attention: each warp's
# merge weights computed once per head (not once per column), and two opt-ins:
# the kernels the attention reads trigger before their wait
# (FG_DEBUG_PDL_ATTN_TRIGGER=1, so the attention's early loads overlap the
# GEMVs), and 3-step tiles in the cluster form (FG_DEBUG_ATTN_CLUSTER_STEPS=3:
# 1025 live keys in one round). Tests under the trigger and the default, the
# delay build under the trigger, stamps of each variant on W-dense and W-tiny,
# then steps of every variant alternating in one run (fusegraph-prev: main at
# cb8e0fc, the session's start).
#   bash scripts/gpu-s24-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
F='GpuAttentionEarly.*:Grid/GpuAttention.*:GpuAttentionOptions.ClusterForm:GpuAttentionReplay.*:GpuDemo*:GpuPrefillThenDecode*:GpuSession*'
timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
FG_KERNEL_CACHE=/tmp/fgk-tr FG_DEBUG_PDL_ATTN_TRIGGER=1 FG_DEBUG_ATTN_CLUSTER_STEPS=3 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-trigger.txt" 2>&1
echo "tests, trigger + steps 3, rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-trigger.txt")"
FG_KERNEL_CACHE=/tmp/fgk-trd FG_DEBUG_PDL_ATTN_TRIGGER=1 FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 $T --gtest_brief=1 \
  --gtest_filter='GpuAttentionEarly.*:GpuDemo*:GpuPrefillThenDecode*' > "$OUT/delay.txt" 2>&1
echo "delay build + trigger rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
V0="FG_DEBUG_ATTN_EARLY=1"
V1="FG_DEBUG_PDL_ATTN_TRIGGER=1"
V2="FG_DEBUG_ATTN_CLUSTER_STEPS=3"
V3="FG_DEBUG_PDL_ATTN_TRIGGER=1 FG_DEBUG_ATTN_CLUSTER_STEPS=3"
V4="FG_DEBUG_ATTN_EARLY=0"
{
for w in w-tiny w-dense; do
  for v in "$V0" "$V1" "$V3"; do
    [ "$(left)" -gt 200 ] || break
    env $v FG_KERNEL_CACHE=/tmp/fgk-st FG_DEBUG_ATTN_STAMPS=1 timeout 40 fusegraph bench --workload $w --compare fused,graph --steps 3 --warmup 2 > /tmp/st.txt 2>&1
    echo "== stamps $w $v rc $?: $(stamps /tmp/st.txt)"
  done
done
pstep() { # the previous build's step
  [ "$(left)" -gt 45 ] || { echo "skipped: prev $1"; return; }
  timeout 75 fusegraph-prev bench --workload "$1" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  echo "== $1 PREV (rc $?): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}')"
}
for r in 1 2; do
  for w in w-tiny w-dense; do
    pstep $w
    for v in "$V4" "$V0" "$V1" "$V2" "$V3"; do stepf $w "$v"; done
  done
done
for w in w-moe-12-q4_k w-dense-q4_k w-moe-12; do
  pstep $w
  for v in "$V0" "$V1" "$V2" "$V3"; do stepf $w "$v"; done
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
