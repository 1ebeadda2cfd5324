#!/usr/bin/env bash
# For the session after the twenty-eighth, second call (after
# scripts/gpu-s28-next.sh): W-dense's prefill of 512 and 2048 tokens with and
# without the opt-in gated_gemm, alternating; the four prefills of 512 tokens
# with the GEMMs chained (FG_DEBUG_WORKSPACE_SLOTS=1) against graph branches
# (the default); decode steps of W-tiny with and without the status fences.
#   bash scripts/gpu-s28-next2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
# A prefill of PRE (512) tokens: workload $1, environment $2 ("" or VAR=V
# ...), bench flags after (--steps 5 --warmup 2 unless given).
pre() {
  local w="$1" envs="$2"; shift 2
  [ "$(left)" -gt 90 ] || { echo "skipped prefill $w $envs $*"; return; }
  env $envs timeout 90 fusegraph bench --workload "$w" --prefill "${PRE:-512}" "$@" > /tmp/pre.txt 2>&1
  local rc=$?
  { echo "== $w $envs $* (rc $rc)"; cat /tmp/pre.txt; } >> "$OUT/prefill-full.txt"
  echo "== prefill $w ${envs:-default} $* (rc $rc): $(grep -E '^prefill_' /tmp/pre.txt | awk '{print $3, $4}')"
}
{
S5="--steps 5 --warmup 2"
for r in 1 2; do
  pre w-dense "" $S5
  pre w-dense "" $S5 --enable-fusion gated_gemm
done
PRE=2048 pre w-dense "" --ctx 4096 --steps 3 --warmup 1
PRE=2048 pre w-dense "" --ctx 4096 --steps 3 --warmup 1 --enable-fusion gated_gemm
for w in w-dense w-moe-12 w-dense-q4_k w-moe-12-q4_k; do
  for r in 1 2; do
    pre $w "" $S5
    pre $w "FG_DEBUG_WORKSPACE_SLOTS=1" $S5
  done
done
for r in 1 2; do
  stepf w-tiny ""
  stepf w-tiny "FG_DEBUG_STATUS_FENCE=0 FG_KERNEL_CACHE=/tmp/fgk-nf"
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
