#!/usr/bin/env bash
# Twenty-ninth session, second call: the GEMM forms again (the strided forms
# now with a positive stride inside one allocation, and T = 2048, which the
# first call lost to the strided form's cuBLAS failure), then the timings of
# scripts/gpu-s28-next2.sh in what time is left.
#   bash scripts/gpu-s29-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S0=$SECONDS
timeout 90 fg_bench_prefill_gemms --tokens 512,2048 > "$OUT/prefill-gemms.txt" 2>&1
echo "prefill gemms rc $? at $((SECONDS - S0)) s"
grep -E '^# T|ERROR' "$OUT/prefill-gemms.txt"
bash scripts/gpu-s28-next2.sh $(( ${1:-560} - (SECONDS - S0) ))
