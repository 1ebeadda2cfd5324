#!/usr/bin/env bash
# The twenty-fourth session's first GPU call: decode attention's early loads
# (attention.cuh, attentionEarly: the first tile of K/V rows into registers
# before griddepcontrol.wait). Tests (the new GpuAttentionEarly case, the
# attention grid, the cluster form, replays, demo, sessions, prefill-then-
# decode), the PDL delay build over the new case and the entries, memcheck,
# then steps with the early loads off (FG_DEBUG_ATTN_EARLY=0) and on,
# alternating in one run, and the breakdowns of W-tiny and W-dense.
#   bash scripts/gpu-s24-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
timeout 200 $T --gtest_brief=1 --gtest_filter='GpuAttentionEarly.*:Grid/GpuAttention.*:GpuAttentionOptions.ClusterForm:GpuAttentionOptions.WDenseShape:GpuAttentionReplay.*:GpuDemo*:GpuPrefillThenDecode*:GpuSession*:GpuGreedyToken.SessionTakesTheDevicesToken' > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
grep -E '^\[  FAILED|Failure' "$OUT/tests.txt" | head
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 100 $T --gtest_brief=1 \
  --gtest_filter='GpuAttentionEarly.*:GpuDemo*:GpuPrefillThenDecode*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
{
for r in 1 2; do
  for w in w-tiny w-dense; do
    stepf $w "FG_DEBUG_ATTN_EARLY=0"
    stepf $w "FG_DEBUG_ATTN_EARLY=1"
  done
done
for w in w-moe-12 w-moe-12-q4_k w-dense-q4_k; do
  stepf $w "FG_DEBUG_ATTN_EARLY=0"
  stepf $w "FG_DEBUG_ATTN_EARLY=1"
done
for e in 0 1; do
  for w in w-tiny w-dense; do
    [ "$(left)" -gt 60 ] || break
    echo "== breakdown $w early=$e"
    FG_DEBUG_ATTN_EARLY=$e timeout 60 fusegraph bench --workload $w --compare fused,graph --breakdown --steps 20 > /tmp/bd.txt 2>&1
    { echo "== breakdown $w early=$e"; cat /tmp/bd.txt; } >> "$OUT/breakdown.txt"
    grep -E "^\| *attention|attention " /tmp/bd.txt | head -3
  done
done
} 2>&1 | tee "$OUT/steps.txt"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 50 ]; then
  timeout 45 compute-sanitizer --tool memcheck $T --gtest_filter='GpuAttentionEarly.*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
