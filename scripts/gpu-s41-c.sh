#!/usr/bin/env bash
# The forty-first session's third call: drift or regression? The H200 of call
# 1 ran every workload 1-2.5 % slower than the thirty-ninth session's H200
# did. Here the build of that session's measured commit (aee2c1c, as
# fusegraph-prev: `git worktree add /tmp/old-s39 aee2c1c`, built there, then
# `bash scripts/gpu-bundle.sh --prev /tmp/old-s39/build`) against this one,
# alternating, in one call.
#   bash scripts/gpu-s41-c.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
one() { # BINARY WORKLOAD
  [ "$(left)" -gt 30 ] || { echo "skipped $1 $2"; return; }
  timeout 60 "$1" bench --workload "$2" --compare fused,graph --steps 30 > /tmp/o.txt 2>&1
  local rc=$?
  { echo "== $1 $2 (rc $rc)"; cat /tmp/o.txt; } >> "$OUT/steps-full.txt"
  echo "== $(basename "$1") $2 (rc $rc): $(grep -E '^graph' /tmp/o.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/o.txt | tail -1)"
}
for round in 1 2; do
  for w in w-moe-12 w-dense w-tiny w-moe-12-q4_k; do
    one fusegraph-prev $w
    one fusegraph $w
  done
done
echo "call done after $((SECONDS - S)) s"
