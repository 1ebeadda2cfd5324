#!/usr/bin/env bash
# Thirtieth session, call 8: the vector elementwise loop restructured for
# groups of 4 a thread (Cfg::kGroups; 1 everywhere by default) — the
# elementwise GpuFused cases and prefill-then-decode with the default, the
# GLU cases with FG_DEBUG_GLU_GROUPS=4 — then W-dense's 2048-token prefill
# with the GLU at 1, 2 and 4 groups a thread, alternating.
#   bash scripts/gpu-s30-call8.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-280}
source scripts/gpu-call-lib.sh
F='*GpuFused*glu*:*GpuFused*gated*:*GpuFused*chain*:*GpuFused*unary*:*GpuFused*relu*:*GpuFused*softcap*:*GpuFused*attention_convert*:GpuPrefillThenDecode*:GpuDemo*'
timeout 110 fusegraph_gpu_tests --gtest_filter="$F" > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
FG_DEBUG_GLU_GROUPS=4 timeout 40 fusegraph_gpu_tests --gtest_filter='*GpuFused*gated*:GpuPrefillThenDecode*Gated*' > /tmp/g4.txt 2>&1
echo "== tests, 4 groups (rc $?): $(summ /tmp/g4.txt)"
for g in 1 4 2 1 4 2; do
  PRE=2048 PRE_MIN_LEFT=25 pre w-dense "FG_DEBUG_GLU_GROUPS=$g" --steps 3 --warmup 1 --breakdown
  grep -E "^  fused.gated_gemm  " /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
done
echo "done after $((SECONDS - S)) s"
