#!/usr/bin/env bash
# The twenty-fourth session's last GPU call, at the new defaults (decode
# attention: early loads, merge weights once per head, 3-step cluster tiles;
# the kernels it reads trigger before their wait): the attention, session,
# entry and fused suites, the PDL delay build, memcheck, then the previous
# build (fusegraph-prev = cb8e0fc) against this one alternating, the kernel
# benchmark's attention rows, and the W-tiny / W-dense breakdowns.
#   bash scripts/gpu-s24-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-330}
source scripts/gpu-call-lib.sh
timeout 100 $T --gtest_brief=1 --gtest_filter='GpuAttentionEarly.*:Grid/GpuAttention.*:GpuAttentionOptions.ClusterForm:GpuAttentionOptions.WDenseShape:GpuAttentionOptions.Window8:GpuAttentionOptions.SoftcapAndSinks:GpuAttentionOptions.HeadDimsNotMultiplesOf32:GpuAttentionOptions.Bf16Cache:GpuAttentionReplay.*:GpuDemo*:GpuPrefillThenDecode*:GpuSession*:GpuGreedyToken.SessionTakesTheDevicesToken:Fused/GpuFused.*rope*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
grep -E '^\[  FAILED' "$OUT/tests.txt" | head
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 40 $T --gtest_brief=1 \
  --gtest_filter='GpuAttentionEarly.*:GpuDemo*:GpuPrefillThenDecode*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
if command -v compute-sanitizer > /dev/null; then
  timeout 40 compute-sanitizer --tool memcheck $T --gtest_filter='GpuAttentionEarly.*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1) $(summ "$OUT/sanitize-memcheck.txt")"
fi
pstep() {
  [ "$(left)" -gt 45 ] || { echo "skipped: prev $1"; return; }
  timeout 75 fusegraph-prev bench --workload "$1" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  echo "== $1 PREV (rc $?): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2, $3, $4}')"
}
nstep() {
  [ "$(left)" -gt 45 ] || { echo "skipped: $1"; return; }
  timeout 75 fusegraph bench --workload "$1" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  echo "== $1 NOW (rc $?): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2, $3, $4}')"
}
{
for w in w-tiny w-dense w-moe-12-q4_k w-dense-q4_k w-tiny w-dense; do pstep $w; nstep $w; done
akern "defaults" '--benchmark_filter=^attention/(w-dense|w-moe)/kv1024/f16/T1(/|$)'
for w in w-tiny w-dense; do
  [ "$(left)" -gt 40 ] || break
  timeout 60 fusegraph bench --workload $w --compare fused,graph --breakdown --steps 20 > /tmp/bd.txt 2>&1
  { echo "== breakdown $w"; cat /tmp/bd.txt; } >> "$OUT/breakdown.txt"
  echo "== breakdown $w: $(grep -E '^ *attention ' /tmp/bd.txt | head -1)"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
