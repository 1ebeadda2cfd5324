#!/usr/bin/env bash
# The ninth session's third GPU call (one GPU): the merged prefill fusions —
# fused.matmul_add over prefill rows as one cuBLASLt GEMM with the residual
# as C (helper branch prefill-matmul-add) and rms_norm_mul_convert (a prefill
# norm written in the GEMMs' 16-bit type), both on by default — checked
# (GpuFused cases, prefill-then-decode, demo, quantised workloads, flash
# prefill), timed beside the previous build (fusegraph-prev = abdc912) and
# with each turned off; the flash prefill with 32-key tiles
# (FG_DEBUG_FLASH_KEYS=32) and launch bounds; then the rest of the GPU suite
# in the time left.
#   bash scripts/gpu-s9-call3.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
NEW='*GpuFused*matmul_add*:*GpuFused*rms_norm_mul*:GpuPrefillThenDecode*:GpuDemo*:*GpuQuantWorkload*:GpuFlashPrefill*:GpuSession*'
timeout 200 "$T" --gtest_filter="$NEW" > "$OUT/new-tests.txt" 2>&1
echo "new tests rc $? after $((SECONDS - S)) s"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/new-tests.txt" | head -20
pb() { timeout 60 "$@" > /tmp/p.txt 2>&1; echo "rc $?"; grep -E "prefill_[0-9]+  |attention|matmul|rms_norm|convert|glu|add  |rope" /tmp/p.txt | head -12; }
{
for w in w-dense w-moe-12; do
  for b in fusegraph-prev fusegraph; do
    echo "== $b $w prefill 512"; pb $b bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
  done
done
for off in matmul_add rms_norm_mul_convert; do
  echo "== fusegraph w-dense prefill 512 --disable-fusion $off"
  pb fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown --disable-fusion $off
done
echo "== fusegraph w-dense prefill 512 (again)"; pb fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown
for f in "FG_DEBUG_FLASH_KEYS=32" "FG_DEBUG_FLASH_KEYS=32 FG_DEBUG_FLASH_MIN_BLOCKS=3" "FG_DEBUG_FLASH_MIN_BLOCKS=2"; do
  echo "== fusegraph w-dense prefill 512 $f"
  (export $f; pb fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown)
done
echo "== fusegraph w-dense prefill 2048 FG_DEBUG_FLASH_KEYS=32"
FG_DEBUG_FLASH_KEYS=32 pb fusegraph bench --workload w-dense --prefill 2048 --ctx 4096 --steps 3 --warmup 1 --breakdown
for b in fusegraph-prev fusegraph; do
  echo "== $b w-dense prefill 2048"; pb $b bench --workload w-dense --prefill 2048 --ctx 4096 --steps 3 --warmup 1 --breakdown
done
echo "== fusegraph w-moe-12 prefill 2048"; pb fusegraph bench --workload w-moe-12 --prefill 2048 --ctx 4096 --steps 3 --warmup 1 --breakdown
} 2>&1 | tee "$OUT/prefill.txt"
for w in w-dense w-moe-12 w-tiny; do
  for b in fusegraph-prev fusegraph; do
    [ $(left) -gt 250 ] || break 2
    echo "== $b $w"
    timeout 60 $b bench --workload $w --compare fused,graph --steps 50 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
    grep -E "graph-fused" /tmp/b.txt
  done
done 2>&1 | tee "$OUT/steps.txt"
timeout $(( $(left) - 10 )) "$T" --gtest_filter="-$NEW" > "$OUT/suite.txt" 2>&1
echo "suite rc $? after $((SECONDS - S)) s" >> "$OUT/suite.txt"
echo "suite: $(grep -cE '^\[       OK \]' $OUT/suite.txt) ok; $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|rc ' $OUT/suite.txt | tail -8 | tr '\n' ' ')"
