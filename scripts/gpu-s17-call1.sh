#!/usr/bin/env bash
# The seventeenth session's first GPU call:
# - the whole-model quantised GPU tests at the sixteenth session's new
#   default (q, k and v merged on DP4A), never run on it before;
# - launch cuts on the new default: every norm prologue
#   (FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0: the FFN norm into gate|up) and q's
#   rope in the attention (--enable-fusion rope_attention);
# - co-resident GEMVs: with half the warps an SM (FG_DEBUG_DP4A_WARPS=8)
#   a DP4A GEMV's blocks leave room for the next launch's, whose
#   programmatic prologue (its first tile's loads) then overlaps this one's
#   body; at 16 warps an SM (91 registers) the next blocks fit only once
#   this launch's leave. Twice the rows a warp (unroll 4) keeps the bytes in
#   flight an SM;
# - the fused breakdown of W-dense q4_K at the defaults.
#   bash scripts/gpu-s17-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 150 $T --gtest_filter='GpuQuantModel*:*Quant*Workload*:GpuPrefillThenDecode.Quantised*' \
  > "$OUT/quant-model-tests.txt" 2>&1
echo "quant model tests rc $?: $(summ "$OUT/quant-model-tests.txt")"
F='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/(q\+o|gate_up|down|lm_head)/q4_k/T1(/|$)'
{
kern "defaults" "$F"
kern "8 warps an SM" --gemv-dp4a-warps=8 "$F"
kern "8 warps an SM, 4 rows a warp" --gemv-dp4a-warps=8 --gemv-dp4a-unroll=4 "$F"
kern "24 warps an SM, 1 row a warp" --gemv-dp4a-warps=24 --gemv-dp4a-unroll=1 "$F"
} 2>&1 | tee "$OUT/kernels.txt"
{
w=w-dense-q4_k
stepf $w ""
stepf $w "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0"
stepf $w "" --enable-fusion rope_attention
stepf $w "FG_DEBUG_DP4A_WARPS=8"
stepf $w "FG_DEBUG_DP4A_WARPS=8 FG_DEBUG_DP4A_UNROLL=4"
stepf $w ""
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0" --enable-fusion rope_attention
} 2>&1 | tee "$OUT/steps.txt"
if [ $(left) -gt 70 ]; then
  timeout $(( $(left) - 5 )) fusegraph bench --workload w-dense-q4_k --compare fused,graph --steps 10 \
    --breakdown > "$OUT/breakdown.txt" 2>&1
  echo "breakdown rc $? after $((SECONDS - S)) s"
fi
echo "done after $((SECONDS - S)) s"
