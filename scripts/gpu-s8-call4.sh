#!/usr/bin/env bash
# The eighth session's fourth GPU call (one GPU): the hybrid decode attention
# (register loads up to 2048 live rows, the cp.async ring above) — its GPU
# tests, the kernel benchmark and whole steps at KV 1024 / 8192 against
# register loads only (FG_DEBUG_ATTN_STAGES=0) — then the rest of the GPU
# suite in the time left.
#   bash scripts/gpu-s8-call4.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
A='GpuAttention*:GpuFlashPrefill*:GpuPrefillThenDecode*'
timeout 200 "$T" --gtest_filter="$A" > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc " "$OUT/tests.txt" | head -30
for v in "--attn-stages 0" ""; do
  echo "== kernels $v"
  timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter='^attention/.*/T1' $v --table /tmp/t.md > /tmp/k.txt 2>&1 || tail -3 /tmp/k.txt
  grep -E "^\| attention" /tmp/t.md | cut -d'|' -f3,4,7,8,11
done 2>&1 | tee "$OUT/kernels.txt"
for kv in 1024 8192; do
  for w in w-dense w-moe-12; do
    for form in "STAGES=0" "STAGES=" "STAGES=0" "STAGES="; do
      echo "== $w kv $kv FG_DEBUG_ATTN_$form"
      env FG_DEBUG_ATTN_$form timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 50 --kv $kv --ctx $((kv * 2)) > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
      grep -E "graph-fused" /tmp/b.txt
    done
  done
done 2>&1 | tee "$OUT/steps.txt"
echo "[$((SECONDS - S)) s] steps"
timeout $(( $(left) - 10 )) "$T" --gtest_filter="-$A" > "$OUT/suite.txt" 2>&1
echo "suite rc $? after $((SECONDS - S)) s" >> "$OUT/suite.txt"
echo "suite: $(grep -cE '^\[       OK \]' $OUT/suite.txt) ok; $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|rc |^\[ RUN' $OUT/suite.txt | tail -4 | tr '\n' ' ')"
