#!/usr/bin/env bash
# The forty-first session's last call: what merging W-tiny's row launches
# away could save at most. FG_DEBUG_DROP_OPS (timing only, wrong values)
# folds every launch of the listed ops into the launch before it: q's rope
# and v's set_rows dropped (k's rope_set_rows standing for one merged launch
# of the three), then the three, against the default, alternating; W-dense
# and W-moe-12 f16 the same where they have the ops.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s41-d.sh 240  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-240}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for round in 1 2; do
  stepf w-tiny ""
  stepf w-tiny "FG_DEBUG_DROP_OPS=rope,set_rows"
  stepf w-tiny "FG_DEBUG_DROP_OPS=rope,set_rows,fused.rope_set_rows"
done
stepf w-dense ""
stepf w-dense "FG_DEBUG_DROP_OPS=rope,set_rows"
stepf w-moe-12 ""
stepf w-moe-12 "FG_DEBUG_DROP_OPS=fused.rms_norm_mul_rope,set_rows"
echo "call done after $((SECONDS - S)) s"
