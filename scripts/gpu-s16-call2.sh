#!/usr/bin/env bash
# For the sixteenth session's second GPU call (written in the fifteenth):
# fewer launches on the DP4A GEMVs (issue 13), W-dense q4_K and W-moe-12
# q4_K, each variant beside the defaults in this call:
# - the norm prologue everywhere (FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0: the
#   cost model's slowdown was calibrated on the tensor-core GEMV; the DP4A
#   GEMV already reads all of x per block to quantise it);
# - q's rope in the attention's q load (--enable-fusion rope_attention);
# - q, k, v as one launch (--enable-fusion matmul_multi);
# - all three.
# Then the fused breakdown of the best, if time is left.
#   bash scripts/gpu-s16-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
# A step with bench flags: stepf WORKLOAD "ENV=V ..." FLAGS...
stepf() {
  local w="$1" envs="$2"; shift 2
  [ "$(left)" -gt 45 ] || { echo "skipped: $w $envs $*"; return; }
  env $envs timeout 75 fusegraph bench --workload "$w" --compare fused,graph --steps 30 "$@" > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== $w $envs $* (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $w ${envs:-} $* (rc $rc): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/step.txt | tail -1)"
}
{
for w in w-dense-q4_k w-moe-12-q4_k; do
  stepf $w ""
  stepf $w "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0"
  stepf $w "" --enable-fusion rope_attention
  stepf $w "" --enable-fusion matmul_multi
  stepf $w "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0" --enable-fusion rope_attention,matmul_multi
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
