#!/usr/bin/env bash
# The forty-third session's first call: is one merged q/k/v launch (the
# tensor-core gemvMulti, today refused by cost: FG_DEBUG_MERGED_TC_SLOWDOWN=-1
# lets it through) with its row work in its stores worth building? The
# merged form as it is (rope, rope_set_rows, set_rows as launches again) and
# its bound with them dropped (FG_DEBUG_DROP_OPS, timing only: the work
# gone, as a store tail would take it into the GEMV) against the default
# (separate q, k, v GEMVs with store tails), alternating.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s43-a.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
M=FG_DEBUG_MERGED_TC_SLOWDOWN=-1
DR=FG_DEBUG_DROP_OPS=rope,set_rows,fused.rope_set_rows
for round in 1 2; do
  stepf w-tiny ""
  stepf w-tiny "$M"
  stepf w-tiny "$M $DR"
  stepf w-tiny "$DR"
done
for w in w-dense w-moe-12; do
  stepf $w ""
  stepf $w "$M"
done
stepf w-dense "$M $DR"
stepf w-moe-12 "$M FG_DEBUG_DROP_OPS=fused.rms_norm_mul_rope,set_rows"
echo "call done after $((SECONDS - S)) s"
