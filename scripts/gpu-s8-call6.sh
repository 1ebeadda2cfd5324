#!/usr/bin/env bash
# The eighth session's last GPU call (one GPU): the final rules — grouped
# expert GEMM tiles of 64 rows for one stream and 32 for gate|up, the ring
# of decode attention compiled in only above 4096 cache rows — checked
# (grouped expert, attention forms) and timed beside the previous build
# (fusegraph-prev, main at 494a6ce) in one run.
#   bash scripts/gpu-s8-call6.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-300}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 150 "$T" --gtest_filter='GpuGroupedExpert.AllPairsOnOneExpert:GpuGroupedExpert.ZeroOneAndManyPairsPerExpert:GpuPrefillThenDecode.GatedExpertChunksEqualsDecodeOnly:GpuAttentionOptions.LoadFormsAndRingDepths:GpuAttentionOptions.WDenseShape' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc " "$OUT/tests.txt" | head -20
pb() { timeout 60 "$@" > /tmp/p.txt 2>&1; echo "rc $?"; grep -E "prefill_512  |matmul_id" /tmp/p.txt | head -3; }
for b in fusegraph-prev fusegraph; do
  echo "== $b w-moe-12 prefill 512"; pb $b bench --workload w-moe-12 --prefill 512 --steps 5 --warmup 2 --breakdown
done 2>&1 | tee "$OUT/prefill.txt"
for kv in 1024 8192; do
  for w in w-moe-12 w-dense w-moe-48; do
    [ $kv = 8192 ] && [ $w = w-moe-48 ] && continue
    for b in fusegraph-prev fusegraph; do
      [ $(left) -gt 15 ] || break 3
      echo "== $b $w kv $kv"
      timeout 60 $b bench --workload $w --compare fused,graph --steps 50 --kv $kv --ctx $((kv * 2)) > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
      grep -E "graph-fused" /tmp/b.txt
    done
  done
done 2>&1 | tee "$OUT/steps.txt"
echo "[$((SECONDS - S)) s] done"
