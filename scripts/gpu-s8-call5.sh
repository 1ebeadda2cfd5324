#!/usr/bin/env bash
# The eighth session's fifth GPU call (one GPU): the grouped expert GEMM in
# 64-row tiles (its tests, prefill-then-decode), then this session's build
# beside the previous one (fusegraph-prev: main at 494a6ce, the seventh
# session's last code) in one run: prefills of 512 tokens (and 32-row tiles,
# FG_DEBUG_MOE_ROWS=32) and decode steps of the four workloads at KV 1024,
# W-dense / W-moe-12 at KV 8192.
#   bash scripts/gpu-s8-call5.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-450}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 120 "$T" --gtest_filter='GpuGroupedExpert*:GpuPrefillThenDecode*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc " "$OUT/tests.txt" | head -20
pb() { timeout 60 "$@" > /tmp/p.txt 2>&1; echo "rc $?"; grep -E "prefill_512  |attention  |matmul_id|gated_matmul_id" /tmp/p.txt | head -4; }
for w in w-moe-12 w-dense; do
  for b in fusegraph-prev fusegraph; do
    [ $(left) -gt 150 ] || break 2
    echo "== $b $w prefill 512"; pb $b bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
  done
  [ $w = w-moe-12 ] && { echo "== fusegraph $w FG_DEBUG_MOE_ROWS=32"; FG_DEBUG_MOE_ROWS=32 pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown; }
done 2>&1 | tee "$OUT/prefill.txt"
echo "[$((SECONDS - S)) s] prefill"
for kv in 1024 8192; do
  for w in w-dense w-moe-12 w-tiny w-moe-48; do
    [ $kv = 8192 ] && [ $w = w-tiny -o $w = w-moe-48 ] && continue
    for b in fusegraph-prev fusegraph; do
      [ $(left) -gt 20 ] || break 3
      echo "== $b $w kv $kv"
      timeout 60 $b bench --workload $w --compare fused,graph --steps 50 --kv $kv --ctx $((kv * 2)) > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
      grep -E "graph-fused" /tmp/b.txt
    done
  done
done 2>&1 | tee "$OUT/steps.txt"
echo "[$((SECONDS - S)) s] steps"
