#!/usr/bin/env bash
# The forty-third session's second call: the merged q / k / v launch with
# each segment's row work in its stores (gemvMulti + store tails; the
# default for projections of at most 4 MiB: CudaCostModel::
# mergedTensorCoreFreeBytes). GPU tests of the tails, the merged forms, the
# demo and sessions; the PDL delay build; memcheck over the new test; then
# W-tiny merged (default) against separate (FG_DEBUG_MERGED_TC_FREE_MB=-1:
# the previous default plan), alternating, and the other workloads (plans
# unchanged) once each.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s43-b.sh 420  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-420}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
F='GpuGemvTails.*:GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuAttentionEarly.*:GpuGreedyToken*:Fused/GpuFused.*rope*'
timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
# The merged forms' own cases (the tensor-core form let through, as their docs say).
FG_DEBUG_MERGED_TC_SLOWDOWN=-1 timeout 100 $T --gtest_brief=1 \
  --gtest_filter='Fused/GpuFused.*matmul_multi*:GpuQuantGemv.Q4KDp4aEveryForm' > "$OUT/multi.txt" 2>&1
echo "multi tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/multi.txt")"
grep '\[tails\]\|\[merged tails\]' "$OUT/tests.txt" | grep -v "40 of 40"
grep -c '\[merged tails\]' "$OUT/tests.txt"
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 90 $T --gtest_brief=1 \
  --gtest_filter='GpuGemvTails.Merged*:GpuGemvTails.Store*:GpuDemo*' > "$OUT/delay.txt" 2>&1
echo "delay build rc $? at $((SECONDS - S)) s: $(summ "$OUT/delay.txt")"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 86 --print-limit 20 $T \
  --gtest_brief=1 --gtest_filter='GpuGemvTails.Merged*' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc $? at $((SECONDS - S)) s: $(summ "$OUT/memcheck.txt")"
{
for r in 1 2 3; do
  stepf w-tiny ""
  stepf w-tiny "FG_DEBUG_MERGED_TC_FREE_MB=-1"
done
stepf w-tiny-q4_k ""
stepf w-tiny-q4_k "FG_DEBUG_MERGED_TC_FREE_MB=-1"
stepf w-dense ""
stepf w-moe-12 ""
stepf w-tiny "" --breakdown
} 2>&1 | tee "$OUT/steps.txt"
echo "call done after $((SECONDS - S)) s"
