#!/usr/bin/env bash
# The sixteenth session's third GPU call:
# 1. Nsight Compute on the W-dense gate_up q4_K GEMV, the register form
#    against the ring of 4 stages (why the ring is slower);
# 2. steps with q, k and v merged (--enable-fusion matmul_multi) beside the
#    defaults: W-moe-12 q4_K, Q4_K_M-like, W-dense q4_0, W-dense f16;
# 3. memcheck over the DP4A forms (the merged segments, the ring) in the
#    time left.
#   bash scripts/gpu-s16-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
if command -v ncu > /dev/null; then
  for st in 1 4; do
    timeout 45 ncu --clock-control none -k regex:matmul --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section MemoryWorkloadAnalysis fg_bench_kernels --reps 1 --no-cublas --gemv-dp4a-stages=$st \
      '--benchmark_filter=^matmul/w-dense/gate_up/q4_k/T1(/|$)' > "$OUT/ncu-stages-$st.txt" 2>&1
    echo "ncu stages $st rc $? after $((SECONDS - S)) s"
  done
fi
{
for w in w-moe-12-q4_k w-dense-q4_k_m w-dense-q4_0 w-dense; do
  stepf $w ""
  stepf $w "" --enable-fusion matmul_multi
done
} 2>&1 | tee "$OUT/steps.txt"
if [ $(left) -gt 60 ]; then
  timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck "$T" \
    --gtest_filter='GpuQuantGemv.Q4KDp4aEveryForm' > "$OUT/memcheck.txt" 2>&1
  echo "memcheck rc $? after $((SECONDS - S)) s: $(summ "$OUT/memcheck.txt")"
fi
echo "done after $((SECONDS - S)) s"
