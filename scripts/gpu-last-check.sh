#!/usr/bin/env bash
# A short call: the quantised GPU tests and the q4_K workloads with the final
# GEMV rule (fifth session).
set -uo pipefail
source .gpu/env.sh
S=$SECONDS
T=$(command -v fusegraph_gpu_tests)
timeout 70 "$T" --gtest_filter='GpuQuant*:Types/GpuQuantWorkload*' > "$OUT/tests.txt" 2>&1; echo "[$((SECONDS - S)) s] tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|worst" "$OUT/tests.txt"
for w in w-moe-12-q4_k w-dense-q4_k; do
  echo "== $w"; timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -3 /tmp/b.txt; grep -E "graph-|ideal|device" /tmp/b.txt
  echo "[$((SECONDS - S)) s]"
done
