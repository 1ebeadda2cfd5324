#!/usr/bin/env bash
# (The experiment code this script switched was removed after the call: see
# bench/RESULTS.md, thirty-ninth session. Kept as the command that ran.)
# The thirty-ninth session's third call: weights asked of L2 one or more
# launches ahead by graph nodes (FG_DEBUG_L2_AHEAD=k, the experiment in
# runtime/cuda/CudaRunner.cpp addL2Prefetches: an fg_l2_prefetch node after
# the launch k back along each weight-reading launch's latest dependencies,
# weights of 1 MB .. FG_DEBUG_L2_MAX_MB). Steps of five workloads, default
# against k = 2 and 3, two rounds.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s39-c.sh 480  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-480}
source scripts/gpu-call-lib.sh
for round in 1 2; do
  for w in w-moe-12-q4_k w-dense-q4_k w-tiny w-moe-12; do
    stepf $w ""
    stepf $w "FG_DEBUG_L2_AHEAD=2"
    stepf $w "FG_DEBUG_L2_AHEAD=3"
  done
done
stepf w-dense-q4_k "FG_DEBUG_L2_AHEAD=2 FG_DEBUG_L2_MAX_MB=64"
stepf w-dense ""
stepf w-dense "FG_DEBUG_L2_AHEAD=2"
stepf w-moe-12-q4_k "FG_DEBUG_L2_AHEAD=1"
stepf w-moe-12-q4_k "FG_DEBUG_L2_AHEAD=4"
echo "call done after $((SECONDS - S)) s"
