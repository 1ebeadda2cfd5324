#!/usr/bin/env bash
# For the eighteenth session (written in the seventeenth): where decode
# attention's 8.5 us a layer at KV 1024 go (issue 11's target: 4 us; 4.2 MB
# of KV, 0.93 us at the bandwidth). The kernel at its defaults and across
# its split knobs (fewer, longer splits: less merging; more, shorter:
# more loads in flight), then Nsight Compute on the default launch (warp
# states, occupancy, the source-level stall counts of the merge).
#   bash scripts/gpu-s18-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
A='--benchmark_filter=^attention/(w-dense|w-moe)/kv1024/f16/T1(/|$)'
{
akern "defaults" "$A"
akern "min tiles 2" --attn-min-tiles 2 "$A"
akern "min tiles 4" --attn-min-tiles 4 "$A"
akern "blocks per SM 2" --attn-blocks-per-sm 2 "$A"
akern "blocks per SM 8" --attn-blocks-per-sm 8 "$A"
akern "steps 1" --attn-steps 1 "$A"
akern "steps 4" --attn-steps 4 "$A"
} 2>&1 | tee "$OUT/attention.txt"
if command -v ncu > /dev/null && [ "$(left)" -gt 90 ]; then
  timeout 80 ncu --clock-control none -k regex:attention --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis \
    fg_bench_kernels --reps 1 --no-cublas '--benchmark_filter=^attention/w-dense/kv1024/f16/T1(/|$)' \
    > "$OUT/ncu-attention.txt" 2>&1
  echo "ncu rc $? after $((SECONDS - S)) s"
fi
echo "done after $((SECONDS - S)) s"
