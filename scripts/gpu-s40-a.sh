#!/usr/bin/env bash
# The fortieth session's first call (written in the thirty-ninth, whose GPU
# loans stopped before its call for them could run): early experts
# (EmitOptions::earlyExperts, off by default until this call:
# FG_DEBUG_EARLY_EXPERTS=1 against 0) — its tests, again with every kernel's
# tail delayed, then W-moe-12 steps each way — while ggml-cuda builds on the
# CPUs; then ggml-cuda's decode steps beside fusegraph's on the issues'
# workloads, in the same call (the closing notes' same-run comparison).
#   bash scripts/gpu-bundle.sh --peers && bash scripts/gpu-s40-a.sh 560  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
ggml=$!
F='GpuEarlyExperts.*:GpuMoeSumFloat.*:GpuRoutingHeads.*:GpuQuantMoeWorkload.*:*GpuFused*matmul_id_sum_add*:*GpuFused*gated_matmul_id*'
timeout 150 "$T" --gtest_filter="$F" > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[early\]|^\[  FAILED|Failure" "$OUT/gtest.txt" | head -10
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 timeout 60 "$T" --gtest_brief=1 \
  --gtest_filter='GpuEarlyExperts.*:GpuMoeSumFloat.*' > "$OUT/delay.txt" 2>&1
echo "== delayed tails (rc $?): $(summ "$OUT/delay.txt")"
for round in 1 2 3; do
  for w in w-moe-12 w-moe-12-q4_k; do
    stepf $w "FG_DEBUG_EARLY_EXPERTS=1"
    stepf $w "FG_DEBUG_EARLY_EXPERTS=0"
  done
done
stepf w-moe-12-q8_0 "FG_DEBUG_EARLY_EXPERTS=1"
stepf w-moe-12-q8_0 "FG_DEBUG_EARLY_EXPERTS=0"
wait $ggml; echo "ggml built after $((SECONDS - S)) s: $(tail -1 /tmp/ggml-build.txt)"
for spec in "dense --wtype f16" "moe --layers 12 --wtype f16" "tiny" "dense --wtype q4_K" \
            "moe --layers 12 --wtype q4_K" "moe --layers 12 --wtype q8_0" "moe --wtype f16"; do
  [ "$(left)" -gt 60 ] || break
  echo "== ggml $spec: $(timeout 60 bash .gpu/peers/ggml-bench.sh --model $spec --reps 200 2>&1 | grep RESULT)"
done
for w in w-dense w-moe-12 w-tiny w-dense-q4_k w-moe-12-q4_k w-moe-12-q8_0; do
  stepf $w ""
  stepf $w "FG_DEBUG_EARLY_EXPERTS=1"
done
STEP_TIMEOUT=120 stepf w-moe-48 "FG_DEBUG_EARLY_EXPERTS=1"
echo "call done after $((SECONDS - S)) s"
