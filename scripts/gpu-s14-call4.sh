#!/usr/bin/env bash
# The fourteenth session's fourth GPU call: W-moe-12 q4_K steps, to place the
# DP4A rule's size limit. Its dense q and o (4.7 MB each) are slower on DP4A
# in the kernel benchmark (4.38 -> 5.52, 4.82 -> 5.76 us), its lm head
# faster (80.9 -> 48.4 us); the step was 0.69 -> 0.78 ms. So: the rule with
# the prologue limit at 8 MiB (q and o keep the tensor cores and gain the
# prefetch prologue; DP4A for the lm head only), and the rule without its
# prologue load.
#   bash scripts/gpu-s14-call4.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-300}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
i=0
step() { # workload, env...
  local w="$1"; shift
  [ $(left) -gt 50 ] || { echo "skipped: $w $*"; return; }
  i=$((i + 1))
  env "$@" timeout 75 fusegraph bench --workload "$w" --compare fused,graph --steps 30 > "$OUT/step-$i.txt" 2>&1
  echo "== $w $* (rc $?, $((SECONDS - S)) s): $(grep -E '^graph' "$OUT/step-$i.txt" | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ')"
}
{
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=0
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=3 FG_DEBUG_PDL_PREFETCH_MAX_MB=8
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=0 FG_DEBUG_PDL_PREFETCH_MAX_MB=8
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=3
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=3 FG_DEBUG_DP4A_PROLOGUE=0
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
