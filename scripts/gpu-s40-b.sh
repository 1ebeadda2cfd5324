#!/usr/bin/env bash
# The fortieth session's second call: fused.rms_norm_mul_matmul (the MoE
# FFN norm stored by its router GEMV, opt-in: --enable-fusion
# rms_norm_mul_matmul) — its GPU cases against the CPU reference, W-moe-12
# q4_K / f16 steps with it and without, alternating, the greedy tokens of
# whole models against the default plan's (the CPU reference of W-moe-12
# needs 75 GiB: no --verify), memcheck over two cases, then q8_0, W-moe-48,
# the ranked early form on top, and a breakdown each way, as time allows
# (most valuable first: the device loans were scarce).
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s40-b.sh 400  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-400}
source scripts/gpu-call-lib.sh
E="--enable-fusion rms_norm_mul_matmul"
timeout 100 "$T" --gtest_filter='*GpuFused*rms_norm_mul_matmul*:*GpuFused*rms_norm_matmul*' > "$OUT/gtest.txt" 2>&1
echo "== fused cases (rc $?): $(summ "$OUT/gtest.txt")"
for round in 1 2; do
  for w in w-moe-12-q4_k w-moe-12; do
    stepf $w "" $E
    stepf $w ""
  done
done
for w in w-moe-12-q4_k w-moe-12; do
  [ "$(left)" -gt 60 ] || break
  timeout 60 fusegraph run $w --prompt-ids 1,2,3,4,5 --steps 24 $E 2>/dev/null | grep "^tokens:" > /tmp/a.txt
  timeout 60 fusegraph run $w --prompt-ids 1,2,3,4,5 --steps 24 2>/dev/null | grep "^tokens:" > /tmp/b.txt
  echo "== greedy tokens $w: $([ -s /tmp/a.txt ] && cmp -s /tmp/a.txt /tmp/b.txt && echo identical || echo DIFFER or missing); $(head -c 200 /tmp/a.txt | tr '\n' ' ')"
done
if [ "$(left)" -gt 100 ]; then
  timeout 80 compute-sanitizer --tool memcheck "$T" \
    --gtest_filter='*GpuFused*rms_norm_mul_matmul_f32_T8*:*GpuFused*rms_norm_mul_matmul_f16_T1*' > "$OUT/memcheck.txt" 2>&1
  echo "== memcheck (rc $?): $(summ "$OUT/memcheck.txt")"
fi
stepf w-moe-12-q4_k "" $E
stepf w-moe-12-q4_k ""
stepf w-moe-12-q8_0 "" $E
stepf w-moe-12-q8_0 ""
stepf w-moe-12-q4_k "FG_DEBUG_EARLY_RANKED=1" $E
STEP_TIMEOUT=120 stepf w-moe-48 "" $E
STEP_TIMEOUT=120 stepf w-moe-48 ""
for f in "$E" ""; do
  [ "$(left)" -gt 60 ] || break
  timeout 60 fusegraph bench --workload w-moe-12-q4_k --breakdown $f > /tmp/bd.txt 2>&1
  echo "== breakdown w-moe-12-q4_k ${f:-default} (rc $?)"; grep -vE "^\s*$" /tmp/bd.txt | tail -24
done
echo "call done after $((SECONDS - S)) s"
