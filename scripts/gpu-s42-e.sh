#!/usr/bin/env bash
# The forty-second session's fifth call: call 4 found W-dense +4.7 % with
# the store tails on, where call 2 had it even; between them the tail struct
# gained the read-ahead members (put() chose them at run time). Now a tail
# without read-ahead has none (fg_early a constant null). Tests and steps.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s42-e.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $T --gtest_brief=1 --gtest_filter='GpuGemvTails.Store*:GpuDemo*' > "$OUT/tails.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tails.txt")"
grep '\[tails\]' "$OUT/tails.txt" | grep -v "40 of 40"
for r in 1 2; do
  stepf w-dense "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf w-dense ""
done
for w in w-tiny w-moe-12-q4_k w-tiny; do
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf $w ""
done
echo "done after $((SECONDS - S)) s"
