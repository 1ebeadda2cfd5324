#!/usr/bin/env bash
# The fourteenth session's last GPU call: W-moe-12 q4_K steps at the new
# default (DP4A for dense q4_K / q8_0 launches above 8 MiB: its lm head)
# against the tensor cores everywhere.
#   bash scripts/gpu-s14-call5.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-110}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
i=0
step() { # workload, env...
  local w="$1"; shift
  [ $(left) -gt 40 ] || { echo "skipped: $w $*"; return; }
  i=$((i + 1))
  env "$@" timeout $(( $(left) - 2 )) fusegraph bench --workload "$w" --compare fused,graph --steps 30 > "$OUT/step-$i.txt" 2>&1
  echo "== $w ${*:-default} (rc $?, $((SECONDS - S)) s): $(grep -E '^graph' "$OUT/step-$i.txt" | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ')"
}
step w-moe-12-q4_k
step w-moe-12-q4_k FG_DEBUG_GEMV_DP4A=0
echo "done after $((SECONDS - S)) s"
