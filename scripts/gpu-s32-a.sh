#!/usr/bin/env bash
# Thirty-second session, call 2 (call 1 ran gpu-s31-next.sh part 1: every
# W-moe-12 q4_K prefill ran past its 90 s and the test filter past 150 s).
#   1. the rest of the quantised GPU tests with q4_K / q5_K scales by byte
#      permute (FG_DEBUG_K4_SCALE_PERMUTE=1), and the grouped-expert tests
#   2. the prefill expert GEMMs alone (fg_bench_kernels, T = 512: gate|up and
#      down, f16 / q4_K / q4_0 / q6_K) as they are, with permute scales, with
#      the shared-memory form (FG_DEBUG_MOE_LDSM=1), and without the m-tile skip
#   3. decode q4_K / q5_K GEMVs, as they are and with permute scales
#   4. where W-moe-12 q4_K's set-up goes (a redirected log now keeps the
#      "loading weights" line with its time)
#   bash scripts/gpu-s32-a.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
FG_DEBUG_K4_SCALE_PERMUTE=1 timeout 200 fusegraph_gpu_tests --gtest_filter='GpuQuantGemv.Q4KDp4aEveryForm:GpuQuantGemv.Q4KScaled*:GpuQuantGemv.NewTypes*:GpuGroupedExpert.*:GpuPrefillThenDecode.Quantised*:*GpuFused*q4_k*' > "$OUT/gtest.txt" 2>&1
echo "== tests, permute (rc $?): $(summ "$OUT/gtest.txt")"
pk() {
  local l="$1" e="$2"; shift 2
  echo "== $l ${e:-default}"
  env $e timeout 90 fg_bench_kernels --reps 5 --no-cublas "$@" --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  cat /tmp/k.txt >> "$OUT/kern-full.txt"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,6,8,11
}
for e in "" "FG_DEBUG_K4_SCALE_PERMUTE=1" "FG_DEBUG_MOE_LDSM=1" "FG_DEBUG_MOE_SKIP_ROWS=0"; do
  pk prefill-experts "$e" --benchmark_filter='_id/w-moe/.*/T512'
done
for e in "" "FG_DEBUG_K4_SCALE_PERMUTE=1"; do
  pk decode-k4 "$e" --benchmark_filter='(matmul|gated_matmul|matmul_id)/w-(dense|moe)/[a-z_+]*/q[45]_k/T(1|8)$'
done
if [ "$(left)" -gt 130 ]; then
  t0=$SECONDS
  timeout 120 fusegraph bench --workload w-moe-12-q4_k --steps 3 --warmup 1 > /tmp/load.txt 2>&1
  echo "== w-moe-12-q4_k decode, whole run (rc $?) $((SECONDS - t0)) s, $(nproc) cores"; grep -E "fusegraph:|^graph|^fused" /tmp/load.txt
fi
echo "call done after $((SECONDS - S)) s"
