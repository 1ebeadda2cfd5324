#!/usr/bin/env bash
# Twenty-ninth session, eighth call: k and v of a prefill chunk as one
# strided-batched GEMM (codegen/cuda/GemmPairs.cpp, written after call 7):
# the GPU tests that run prefill GEMMs against the CPU reference, then
# W-dense's 512-token prefill with and without the pairs, alternating.
#   bash scripts/gpu-s29-call8.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-250}
PRE_MIN_LEFT=25
source scripts/gpu-call-lib.sh
timeout 110 $T --gtest_brief=1 --gtest_filter='GpuPrefillThenDecode*:GpuDemo*:*Prefill*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
for r in 1 2; do
  pre w-dense "" --steps 5 --warmup 2
  pre w-dense "FG_DEBUG_GEMM_PAIRS=0" --steps 5 --warmup 2
done
pre w-moe-12 "" --steps 5 --warmup 2
pre w-moe-12 "FG_DEBUG_GEMM_PAIRS=0" --steps 5 --warmup 2
echo "done after $((SECONDS - S)) s"
