#!/usr/bin/env bash
# (The experiment code this script switched was removed after the call: see
# bench/RESULTS.md, thirty-ninth session. Kept as the command that ran.)
# The thirty-ninth session's second call: the upper bound of an expert down
# projection (fused.matmul_id_sum_add, DP4A) that knows its experts before
# its programmatic-launch wait. FG_DEBUG_MOE_SUM_EARLY_UNSAFE=1 (TIMING ONLY,
# wrong results) reads ids and loads the first weight tile before the wait;
# a real form would rank the router's logits (written two launches back)
# there. W-moe-12 q4_K steps each way, three rounds, and one breakdown each.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s39-b.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
for round in 1 2 3; do
  stepf w-moe-12-q4_k ""
  stepf w-moe-12-q4_k "FG_DEBUG_MOE_SUM_EARLY_UNSAFE=1"
done
for f in "" "FG_DEBUG_MOE_SUM_EARLY_UNSAFE=1"; do
  [ "$(left)" -gt 60 ] || break
  env $f timeout 60 fusegraph bench --workload w-moe-12-q4_k --compare fused,graph --steps 10 --breakdown > /tmp/bd.txt 2>&1
  echo "== breakdown ${f:-default} (rc $?)"; cp /tmp/bd.txt "$OUT/breakdown-${f:+early}.txt"
  grep -E "gated_matmul_id|matmul_id_sum_add|topk|^graph" /tmp/bd.txt | head -8
done
echo "call done after $((SECONDS - S)) s"
