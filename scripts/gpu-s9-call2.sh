#!/usr/bin/env bash
# The ninth session's second GPU call (one GPU): the prefill flash kernel
# with ldmatrix fragments, exp2 in log2 units, two cp.async key-tile stages
# and the longest query tiles first; the elementwise vector form and
# glu_convert made default. Checks them (flash prefill, prefill-then-decode,
# demo, the other elementwise forms, glu_convert), times prefill and decode
# beside the previous build (fusegraph-prev = main at abdc912) in one run,
# profiles one rope and one attention launch and one layer's library GEMMs
# of W-dense's prefill with ncu,
# then runs the rest of the GPU suite in the time left.
#   bash scripts/gpu-s9-call2.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
NEW='*rope*:GpuFlashPrefill*:GpuAttentionPrefill*:GpuAttentionOptions.*Prefill*:GpuPrefillThenDecode*:GpuDemo*:GpuOpScalar*:GpuOpPrefetch*:*glu_convert*'
timeout 220 "$T" --gtest_filter="$NEW" > "$OUT/new-tests.txt" 2>&1
echo "new tests rc $? after $((SECONDS - S)) s"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/new-tests.txt" | head -20
pb() { timeout 60 "$@" > /tmp/p.txt 2>&1; echo "rc $?"; grep -E "prefill_[0-9]+  |attention|rope  |convert|glu|add  " /tmp/p.txt | head -8; }
{
for w in w-dense w-moe-12; do
  for b in fusegraph-prev fusegraph; do
    echo "== $b $w prefill 512"; pb $b bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown
  done
done
for f in 1 2; do
  echo "== fusegraph w-dense prefill 512 FG_DEBUG_FLASH_STAGES=$f"
  FG_DEBUG_FLASH_STAGES=$f pb fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown
done
for mb in 2 3; do
  echo "== fusegraph w-dense prefill 512 FG_DEBUG_FLASH_MIN_BLOCKS=$mb"
  FG_DEBUG_FLASH_MIN_BLOCKS=$mb pb fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown
done
for b in fusegraph-prev fusegraph; do
  echo "== $b w-dense prefill 2048"; pb $b bench --workload w-dense --prefill 2048 --ctx 4096 --steps 3 --warmup 1 --breakdown
done
} 2>&1 | tee "$OUT/prefill.txt"
for w in w-dense w-moe-12 w-tiny; do
  for b in fusegraph-prev fusegraph fusegraph-prev fusegraph; do
    [ $(left) -gt 200 ] || break 2
    echo "== $b $w"
    timeout 60 $b bench --workload $w --compare fused,graph --steps 50 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
    grep -E "graph-fused" /tmp/b.txt
  done
done 2>&1 | tee "$OUT/steps.txt"
if command -v ncu >/dev/null && [ $(left) -gt 180 ]; then
  for k in rope attention; do
    timeout 70 ncu --clock-control none -k regex:"^fg_${k}_" --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats --section LaunchStats \
      fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 > "$OUT/ncu-$k.txt" 2>&1
    echo "ncu $k rc $?"
  done
  # The library GEMMs of one layer (q, k, v, o, gate, up, down): time, grid, SOL.
  timeout 90 ncu --clock-control none -k regex:'gemm|nvjet|cutlass|xmma' --launch-count 8 \
    --section SpeedOfLight --section LaunchStats \
    fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 > "$OUT/ncu-gemm.txt" 2>&1
  echo "ncu gemm rc $?"
fi
timeout $(( $(left) - 10 )) "$T" --gtest_filter="-$NEW" > "$OUT/suite.txt" 2>&1
echo "suite rc $? after $((SECONDS - S)) s" >> "$OUT/suite.txt"
echo "suite: $(grep -cE '^\[       OK \]' $OUT/suite.txt) ok; $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|rc ' $OUT/suite.txt | tail -6 | tr '\n' ' ')"
