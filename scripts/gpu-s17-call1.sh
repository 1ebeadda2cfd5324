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
# - both; then the fused breakdown of W-dense q4_K at the defaults.
#   bash scripts/gpu-s17-call1.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
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
  stepf $w "FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0" --enable-fusion rope_attention
done
} 2>&1 | tee "$OUT/steps.txt"
if [ $(left) -gt 80 ]; then
  timeout $(( $(left) - 5 )) fusegraph bench --workload w-dense-q4_k --compare fused,graph --steps 10 \
    --breakdown > "$OUT/breakdown.txt" 2>&1
  echo "breakdown rc $? after $((SECONDS - S)) s"
fi
echo "done after $((SECONDS - S)) s"
