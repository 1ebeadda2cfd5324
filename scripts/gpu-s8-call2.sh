#!/usr/bin/env bash
# The eighth session's second GPU call (one GPU): the flash-decoding kernel
# with each warp's cp.async ring in shared memory (the staged form), checked
# (the attention GPU tests incl. every load form, prefill-then-decode,
# memcheck and racecheck) and timed against the register-load form
# (FG_DEBUG_ATTN_STAGES=0 / --attn-stages 0: the kernel before this change)
# in the kernel benchmark and in whole decode steps; then the prefill forms
# made default after call 1 (gemm-inputs, the single-half flash kernel)
# against their previous forms, and the opt-in gated expert chunks.
#   bash scripts/gpu-s8-call2.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
timeout 230 "$T" --gtest_filter='GpuAttention*:GpuFlashPrefill*:GpuPrefillThenDecode*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc " "$OUT/tests.txt" | head -30
K='^attention/.*/T(1|8)$'
for v in "" "--attn-stages 0" "--attn-stages 3" "--attn-steps 2" "--attn-blocks-per-sm 3"; do
  [ $(left) -gt 300 ] || break
  echo "== kernels $v"
  timeout 90 fg_bench_kernels --reps 5 --no-cublas --benchmark_filter="$K" $v --table /tmp/t.md > /tmp/k.txt 2>&1 || tail -3 /tmp/k.txt
  grep -E "^\| attention" /tmp/t.md | cut -d'|' -f3,4,7,8,11
done 2>&1 | tee "$OUT/kernels.txt"
echo "[$((SECONDS - S)) s] kernels"
for r in 1 2; do
  for w in w-dense w-moe-12 w-tiny; do
    for st in 0 ""; do
      [ $(left) -gt 200 ] || break 3
      echo "== $w FG_DEBUG_ATTN_STAGES='$st'"
      FG_DEBUG_ATTN_STAGES=$st timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 50 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
      grep -E "graph-fused" /tmp/b.txt
    done
  done
done 2>&1 | tee "$OUT/steps.txt"
echo "[$((SECONDS - S)) s] steps"
pb() { timeout 60 "$@" > /tmp/p.txt 2>&1; echo "rc $?"; grep -E "prefill_512  |attention|matmul" /tmp/p.txt | head -4; }
for w in w-dense w-moe-12; do
  [ $(left) -gt 110 ] || break
  echo "== $w default"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
  echo "== $w --gemm-x-inside FG_DEBUG_FLASH_HALF=0"; FG_DEBUG_FLASH_HALF=0 pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown --gemm-x-inside
  [ $w = w-moe-12 ] && { echo "== $w --enable-fusion gated_matmul_id_chunk"; pb fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown --enable-fusion gated_matmul_id_chunk; }
done 2>&1 | tee "$OUT/prefill.txt"
echo "[$((SECONDS - S)) s] prefill"
for tool in memcheck racecheck; do
  [ $(left) -gt 40 ] || break
  timeout $(( $(left) - 15 )) compute-sanitizer --tool $tool --error-exitcode 9 "$T" \
    --gtest_filter='GpuAttentionOptions.WDenseShape:GpuAttentionOptions.LoadFormsAndRingDepths:GpuAttentionReplay.*' > "$OUT/san-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -cE 'OK \]' $OUT/san-$tool.txt) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.txt | tr '\n' ' ')"
done
