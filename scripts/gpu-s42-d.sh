#!/usr/bin/env bash
# The forty-second session's last call: the store tails on by default.
# Steps with them off / on alternating (W-tiny, W-dense, W-moe-12 f16 and
# q4_K), then the whole GPU suite with the new defaults until the deadline.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s42-d.sh 570  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-570}
source scripts/gpu-call-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
{
for r in 1 2; do
  stepf w-tiny "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf w-tiny ""
done
for w in w-dense w-moe-12 w-moe-12-q4_k w-dense-q4_k; do
  stepf $w "FG_DEBUG_GEMV_STORE_TAILS=0"
  stepf $w ""
done
} 2>&1 | tee "$OUT/steps.txt"
timeout $(( $(left) - 15 )) $T --gtest_brief=1 > "$OUT/suite.txt" 2>&1
echo "whole suite rc $? at $((SECONDS - S)) s: $(summ "$OUT/suite.txt")"
grep -E "^\[  FAILED|tests ran|PASSED|SKIPPED" "$OUT/suite.txt" | head -20
echo "done after $((SECONDS - S)) s"
