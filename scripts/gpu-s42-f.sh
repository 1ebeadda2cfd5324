#!/usr/bin/env bash
# The forty-second session's H200 call: the store tails (on by default) on
# the H200. ggml-cuda builds in the background (../shared/peers) while the
# GPU tests of what changed run (the tails, the demo, sessions, prefill then
# decode, quantised workloads, fused rope cases: the rope rotation is now
# rounded alike everywhere) and the PDL delay build; then the previous build
# (fusegraph-prev, 3e9f979) and this one alternating on W-tiny, W-dense and
# W-moe-12, and ggml on the same workloads.
#   bash scripts/gpu-bundle.sh --prev /tmp/prev/build --peers  (drop fg_bench_*)
#   then bash scripts/gpu-s42-f.sh 540  (carry [".gpu"], kind nvidia-h200)
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
(bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.log 2>&1 &)
F='GpuGemvTails.*:GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuQuantWorkload*:GpuAttentionEarly.*:GpuGreedyToken*:GpuInputCheck*:Fused/GpuFused.*rope*:GpuRopeAttention*:GpuOps*Rope*'
timeout 200 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
grep '\[tails\]' "$OUT/tests.txt" | grep -v "40 of 40"
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 90 $T --gtest_brief=1 \
  --gtest_filter='GpuGemvTails.Store*:GpuDemo*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
prevstep() {
  [ "$(left)" -gt 45 ] || { echo "skipped: prev $1"; return; }
  timeout 75 fusegraph-prev bench --workload "$1" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  echo "== $1 prev (rc $?): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/step.txt | tail -1)"
}
{
for r in 1 2; do
  prevstep w-tiny; stepf w-tiny ""
done
for w in w-dense w-moe-12; do prevstep $w; stepf $w ""; done
} 2>&1 | tee "$OUT/steps.txt"
while [ ! -x /tmp/ggml-peer/bin/ggml_decode ] && [ "$(left)" -gt 40 ]; do sleep 5; done
echo "ggml built: $([ -x /tmp/ggml-peer/bin/ggml_decode ] && echo yes || echo no) at $((SECONDS - S)) s"
for m in tiny dense moe; do
  [ "$(left)" -gt 25 ] || break
  timeout 40 bash .gpu/peers/ggml-bench.sh --model $m --reps 100 2>&1 | grep RESULT | tee -a "$OUT/steps.txt"
done
[ "$(left)" -gt 20 ] && { prevstep w-tiny; stepf w-tiny ""; } 2>&1 | tee -a "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
