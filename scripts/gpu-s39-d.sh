#!/usr/bin/env bash
# (The experiment code this script switched was removed after the call: see
# bench/RESULTS.md, thirty-ninth session. Kept as the command that ran.)
# The thirty-ninth session's fourth call: the expert down projection's
# matrices asked of L2 by the gated expert launch once its routing head
# knows the experts (EmitOptions::expertDownPrefetch, FG_DEBUG_DOWN_PREFETCH=1,
# codegen/cuda/ExpertPrefetch.h). Greedy tokens each way (a prefetch changes
# no value), then W-moe-12 q4_K steps each way, three rounds, a breakdown
# each, and q4_0 / q8_0 once.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s39-d.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
for f in "" "FG_DEBUG_DOWN_PREFETCH=1"; do
  env $f timeout 90 fusegraph run w-moe-12-q4_k --prompt-ids 1,2,3,4,5 --steps 24 --device cuda > /tmp/run.txt 2>&1
  echo "== run ${f:-default} (rc $?): $(grep -iE 'token|ids|error' /tmp/run.txt | head -3 | tr '\n' ' ')"
  cp /tmp/run.txt "$OUT/run-${f:+pf}.txt"
done
for round in 1 2 3; do
  stepf w-moe-12-q4_k ""
  stepf w-moe-12-q4_k "FG_DEBUG_DOWN_PREFETCH=1"
done
for w in w-moe-12-q4_0 w-moe-12-q8_0; do
  stepf $w ""
  stepf $w "FG_DEBUG_DOWN_PREFETCH=1"
done
for f in "" "FG_DEBUG_DOWN_PREFETCH=1"; do
  [ "$(left)" -gt 60 ] || break
  env $f timeout 60 fusegraph bench --workload w-moe-12-q4_k --compare fused,graph --steps 10 --breakdown > /tmp/bd.txt 2>&1
  echo "== breakdown ${f:-default} (rc $?)"; cp /tmp/bd.txt "$OUT/breakdown-${f:+pf}.txt"
  grep -E "gated_matmul_id|matmul_id_sum_add|^graph" /tmp/bd.txt | head -4
done
echo "call done after $((SECONDS - S)) s"
