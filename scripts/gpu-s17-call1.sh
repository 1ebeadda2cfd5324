#!/usr/bin/env bash
# For the seventeenth session's first GPU call (written in the sixteenth,
# after its last call): fewer launches a layer on the new default (q, k and
# v merged on DP4A, 9 launches a W-dense layer), each beside the defaults
# in this call:
# - every norm prologue (FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0): the cost
#   model's 25 % slowdown was measured on the tensor-core GEMV; the DP4A
#   GEMV reads and quantises all of x per block anyway, so the FFN norm may
#   pay on gate|up too (one launch fewer a layer);
# - q's rope in the attention's q load (--enable-fusion rope_attention);
# - both;
# - Q4_K_M-like with and without the merge (its q4_K q and k now merge
#   beside a q6_K v: 308 launches, not yet timed);
# - the fused breakdown of W-dense q4_K at the defaults;
# - q4_K kernels with more resident warps (the sixteenth session's Nsight:
#   25 % occupancy, register-bound at 91 registers, a warp issuing every ~8
#   cycles): one row a warp at 24 and 32 warps an SM.
#   bash scripts/gpu-s17-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
{
for w in w-dense-q4_k w-moe-12-q4_k; do
  stepf $w ""
  stepf $w "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0"
  stepf $w "" --enable-fusion rope_attention
  stepf $w "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0" --enable-fusion rope_attention
done
stepf w-dense-q4_k_m ""
stepf w-dense-q4_k_m "" --disable-fusion matmul_multi
} 2>&1 | tee "$OUT/steps.txt"
F='--benchmark_filter=^(matmul|fused.gated_matmul)/w-dense/(q\+o|gate_up|down|lm_head)/q4_k/T1(/|$)'
{
kern "defaults" "$F"
kern "1 row a warp, 24 warps" --gemv-dp4a-unroll=1 --gemv-dp4a-warps=24 "$F"
kern "1 row a warp, 32 warps" --gemv-dp4a-unroll=1 --gemv-dp4a-warps=32 "$F"
} 2>&1 | tee "$OUT/kernels.txt"
if [ $(left) -gt 80 ]; then
  timeout $(( $(left) - 5 )) fusegraph bench --workload w-dense-q4_k --compare fused,graph --steps 10 \
    --breakdown > "$OUT/breakdown.txt" 2>&1
  echo "breakdown rc $? after $((SECONDS - S)) s"
fi
echo "done after $((SECONDS - S)) s"
