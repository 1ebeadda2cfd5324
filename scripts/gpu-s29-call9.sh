#!/usr/bin/env bash
# Twenty-ninth session, ninth call: more alternations of W-dense's 512-token
# prefill with and without the k|v GEMM pairs (call 8's two were within noise).
#   bash scripts/gpu-s29-call9.sh  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=100
PRE_MIN_LEFT=5
source scripts/gpu-call-lib.sh
for r in 1 2 3 4; do
  pre w-dense "FG_DEBUG_GEMM_PAIRS=0" --steps 9 --warmup 2
  pre w-dense "" --steps 9 --warmup 2
done
echo "done after $((SECONDS - S)) s"
