#!/usr/bin/env bash
# What the twenty-second session wrote after its last GPU call and could not
# run (no device time left): run --verify over a DP4A lm head (the lit test
# tests/ir/cli/verify-int8.fg's command, checked here by grep), the router
# case with a padding warp and rows longer than a lane holds before the wait,
# and memcheck over it.
#   bash scripts/gpu-s22-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-200}
source scripts/gpu-call-lib.sh
timeout 60 fusegraph run tests/ir/cli/verify-int8.fg --device cuda --verify --prompt-ids 3,1,4 --steps 4 \
  > "$OUT/verify-int8.txt" 2>&1
echo "verify-int8 rc $?:"; grep -E '^(device|tokens|verify)' "$OUT/verify-int8.txt"
timeout 60 $T --gtest_filter='*GpuFused*rms_norm_matmul_topk*' > "$OUT/tests-router.txt" 2>&1
echo "router tests rc $?: $(summ "$OUT/tests-router.txt")"
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 50 ]; then
  timeout 45 compute-sanitizer --tool memcheck $T --gtest_filter='*GpuFused*rms_norm_matmul_topk*E61*' \
    > "$OUT/sanitize-memcheck.txt" 2>&1
  echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-memcheck.txt" | head -1)"
fi
echo "done after $((SECONDS - S)) s"
