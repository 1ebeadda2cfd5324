#!/usr/bin/env bash
# The seventh session's third GPU call (one GPU): the flash-attention prefill
# kernel staging key tiles by cp.async, checked (its GPU tests, prefill-then-
# decode, memcheck and racecheck) and timed against the previous build
# (fusegraph-prev) on W-dense / W-moe-12 prefills of 512 tokens; then the
# W-dense q6_K and Q4_K_M-like steps with q6_K wide and narrow.
#   bash scripts/gpu-s7-call3.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-560}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
export FG_KERNEL_CACHE=/tmp/fgk0
F='GpuFlashPrefill*:GpuPrefillThenDecode*:GpuAttention*'
timeout 150 "$T" --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s" >> "$OUT/tests.txt"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|rc " "$OUT/tests.txt" | head -20
for b in fusegraph-prev fusegraph fusegraph-prev fusegraph; do
  for w in w-dense w-moe-12; do
    [ $(left) -gt 200 ] || break 2
    echo "== $b $w prefill 512"
    timeout 90 $b bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown > /tmp/p.txt 2>&1; echo "rc $?"
    grep -E "512|attention|matmul|glu|total" /tmp/p.txt | head -12
  done
done 2>&1 | tee "$OUT/prefill.txt"
echo "[$((SECONDS - S)) s] prefill"
for w in w-dense-q6_k w-dense-q4_k_m; do
  for e in 1 0; do
    [ $(left) -gt 120 ] || break 2
    echo "== $w FG_DEBUG_GEMV_WIDE_Q6K=$e"
    FG_DEBUG_GEMV_WIDE_Q6K=$e timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 30 > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
    grep -E "graph-fused" /tmp/b.txt
  done
done 2>&1 | tee "$OUT/q6k.txt"
for tool in racecheck memcheck; do
  [ $(left) -gt 40 ] || break
  timeout $(( $(left) - 15 )) compute-sanitizer --tool $tool --error-exitcode 9 "$T" \
    --gtest_filter='GpuFlashPrefillOptions.*:GpuFlashPrefillReplay.*' > "$OUT/san-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -cE 'OK \]' $OUT/san-$tool.txt) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san-$tool.txt | tr '\n' ' ')"
done
