#!/usr/bin/env bash
# The eighth session's third GPU call (one GPU): the attention, flash prefill,
# prefill-then-decode and grouped expert tests on the defaults of 10d86d3
# (the staged decode attention, the single-half flash prefill, gemm-inputs,
# gated_matmul_id_chunk), then the decode attention's forms in the kernel
# benchmark (KV 1024 / 8192 / 32768) and in whole steps at KV 1024 and 8192:
# register loads (FG_DEBUG_ATTN_STAGES=0), the staged default, and staged
# with at least 4 tiles a warp per split (FG_DEBUG_ATTN_MIN_TILES=4).
#   bash scripts/gpu-s8-call3.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 200 "$T" --gtest_filter='GpuAttention*:GpuFlashPrefill*:GpuPrefillThenDecode*:GpuGroupedExpert*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc " "$OUT/tests.txt" | head -30
K='^attention/.*/T1'
for v in "--attn-stages 0" "" "--attn-min-tiles 4" "--attn-stages 3" "--attn-blocks-per-sm 3" "--attn-min-tiles 2"; do
  [ $(left) -gt 250 ] || break
  echo "== kernels $v"
  timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter="$K" $v --table /tmp/t.md > /tmp/k.txt 2>&1 || tail -3 /tmp/k.txt
  grep -E "^\| attention" /tmp/t.md | cut -d'|' -f3,4,7,8,11
done 2>&1 | tee "$OUT/kernels.txt"
tail -5 /tmp/k.txt
echo "[$((SECONDS - S)) s] kernels"
for kv in 1024 8192; do
  for w in w-dense w-tiny w-moe-12; do
    for form in "STAGES=0" "STAGES=" "MIN_TILES=4" "STAGES=0" "STAGES="; do
      [ $(left) -gt 30 ] || break 3
      echo "== $w kv $kv FG_DEBUG_ATTN_$form"
      env FG_DEBUG_ATTN_$form timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 50 --kv $kv --ctx $((kv * 2)) > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
      grep -E "graph-fused" /tmp/b.txt
    done
  done
done 2>&1 | tee "$OUT/steps.txt"
echo "[$((SECONDS - S)) s] steps"
