#!/usr/bin/env bash
# The sixteenth session's last GPU call: the new default (q, k and v merged
# where the merged launch runs on DP4A: matmul_multi on, decided by the
# CUDA target's cost) against --disable-fusion matmul_multi, in one call;
# the merged ops' fused GPU cases under the new cost rule; q4_K kernels in
# the staged form at 32 warps an SM (2 stages fit: 62 registers).
#   bash scripts/gpu-s16-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-270}
source scripts/gpu-call-lib.sh
timeout 60 "$T" --gtest_filter='*GpuFused*matmul_multi*:GpuQuantGemv.Q4KDp4aExact*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
{
stepf w-dense-q4_k "" --disable-fusion matmul_multi
stepf w-dense-q4_k ""
stepf w-dense ""
} 2>&1 | tee "$OUT/steps.txt"
F='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/(gate_up|down|lm_head)/q4_k/T1(/|$)'
[ "$(left)" -gt 40 ] && timeout 35 fg_bench_kernels --reps 5 --no-cublas --gemv-dp4a-stages=4 --gemv-dp4a-warps=32 "$F" --table /tmp/k.md > /tmp/k.txt 2>&1 &&
  { echo "== kernels, staged at 32 warps"; grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,6,8,11; }
echo "done after $((SECONDS - S)) s"
