#!/usr/bin/env bash
# The thirty-seventh session's closing check: the tests whose code changed
# and did not run in its calls (the input check's death test by the
# binary's bare name, greedy / sampling at the default 256 threads), and
# the gated patterns after the cuBLAS rule (gated_matmul at T = 1, 2).
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s37-d.sh 120  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-120}
source scripts/gpu-call-lib.sh
timeout 60 fusegraph_gpu_tests --gtest_filter='GpuInputCheck*:GpuGreedyToken*:GpuSampling*' > "$OUT/gtest.txt" 2>&1
echo "== tests by the bare name (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure" "$OUT/gtest.txt" | head -6
timeout 50 fg_bench_patterns --benchmark_filter='gated_matmul/|matmul_add/' > "$OUT/patterns.txt" 2>&1
echo "== patterns (rc $?)"
grep -E "fused" "$OUT/patterns.txt" | grep -oE "^pattern/[^ ]*|speedup=[0-9.]+" | paste - - | head
echo "call done after $((SECONDS - S)) s"
