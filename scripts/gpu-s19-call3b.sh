#!/usr/bin/env bash
# The nineteenth session's last GPU call, cut to the ~100 s of device time left
# after four refused starts (scripts/gpu-s19-call3.sh never ran): q4_K, q8_0
# and q4_0 read by whole warps (--gemv-dp4a-warp-load) against their lane
# forms in kernels, then the DP4A GEMV tests (the same bits) in the time left.
#   bash scripts/gpu-s19-call3b.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-100}
source scripts/gpu-call-lib.sh
Q='--benchmark_filter=^matmul/w-dense/(gate_up|lm_head)/(q4_k|q8_0|q4_0)/T1(/|$)'
KERN_MIN_LEFT=20
kern "lanes (default)" "$Q"
kern "whole warps (--gemv-dp4a-warp-load)" --gemv-dp4a-warp-load "$Q"
timeout $(( $(left) - 3 )) $T --gtest_filter='GpuQuantGemv.Q4KDp4aExact*' > "$OUT/tests-warp-load.txt" 2>&1
echo "DP4A exact test rc $?: $(summ "$OUT/tests-warp-load.txt")"
echo "done after $((SECONDS - S)) s"
