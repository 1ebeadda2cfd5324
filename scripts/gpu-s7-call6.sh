#!/usr/bin/env bash
# The seventh session's last, short GPU call: the grouped expert GEMM with its
# global loads pipelined one k-step ahead — its GPU tests and W-moe-12's
# 512-token prefill against the previous build (fusegraph-prev, edda47d).
set -uo pipefail
source .gpu/env.sh
S=$SECONDS
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 70 fusegraph_gpu_tests --gtest_filter='GpuGroupedExpert*:GpuPrefillThenDecode*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/tests.txt" | head
for b in fusegraph-prev fusegraph; do
  echo "== $b w-moe-12 prefill 512"
  timeout 50 $b bench --workload w-moe-12 --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1; echo "rc $? after $((SECONDS - S)) s"
  grep -E "prefill_512  |matmul_id|attention" /tmp/p.txt | head -4
done 2>&1 | tee "$OUT/prefill.txt"
