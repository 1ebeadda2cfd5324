#!/usr/bin/env bash
# Written at the end of the twenty-fourth session for the next one's first
# GPU call (no device time was left): the early loads' coherent re-reads
# (ld.global.cg, written after the last call) and q loaded before the
# position (EmitOptions::attentionQFirst, off) and the cluster form's
# partials by st.async (attentionClusterAsync, off) — tests, the PDL delay
# build, memcheck, then steps with each off and on alternating, and the
# phase stamps with q first.
#   bash scripts/gpu-s25-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
F='GpuAttentionEarly.*:GpuAttentionOptions.QFirstBitIdentical:GpuAttentionOptions.ClusterAsyncBitIdentical:Grid/GpuAttention.*:GpuAttentionOptions.ClusterForm:GpuAttentionOptions.WDenseShape:GpuAttentionReplay.*:GpuDemo*:GpuPrefillThenDecode*:GpuSession*'
timeout 120 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
FG_KERNEL_CACHE=/tmp/fgk-q FG_DEBUG_ATTN_Q_FIRST=1 FG_DEBUG_ATTN_CLUSTER_ASYNC=1 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-qfirst.txt" 2>&1
echo "tests, q first + cluster async, rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests-qfirst.txt")"
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 40 $T --gtest_brief=1 \
  --gtest_filter='GpuAttentionEarly.*:GpuDemo*:GpuPrefillThenDecode*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 40 compute-sanitizer --tool memcheck $T --gtest_filter='GpuAttentionEarly.*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
{
for r in 1 2; do
  for w in w-tiny w-dense w-moe-12-q4_k; do
    stepf $w "FG_DEBUG_ATTN_Q_FIRST=0"
    stepf $w "FG_DEBUG_ATTN_Q_FIRST=1"
    stepf $w "FG_DEBUG_ATTN_CLUSTER_ASYNC=1"
    stepf $w "FG_DEBUG_ATTN_Q_FIRST=1 FG_DEBUG_ATTN_CLUSTER_ASYNC=1"
  done
done
for w in w-tiny w-dense; do
  [ "$(left)" -gt 40 ] || break
  FG_KERNEL_CACHE=/tmp/fgk-st FG_DEBUG_ATTN_STAMPS=1 FG_DEBUG_ATTN_Q_FIRST=1 timeout 40 fusegraph bench --workload $w --compare fused,graph --steps 3 --warmup 2 > /tmp/st.txt 2>&1
  echo "== stamps $w q first rc $?: $(stamps /tmp/st.txt)"
done
for w in w-moe-12-q4_k w-tiny w-dense-q4_k; do
  [ "$(left)" -gt 50 ] || break
  timeout 45 fusegraph bench --workload $w --compare fused,graph --steps 10 --warmup 3 --breakdown > "$OUT/breakdown-$w.txt" 2>&1
  echo "== breakdown $w rc $?"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
