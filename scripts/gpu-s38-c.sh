#!/usr/bin/env bash
# The thirty-eighth session's third call: the ring's 2-step tiles as the
# rule (AttentionEmitter.cpp), the tree merge opt-in.
#   1. every decode attention test ('*GpuAttention*': the grid too);
#   2. the kernel at KV 8192 / 32768, T = 1, 2, 4, 8 with --pdl: the rule
#      against 1-step tiles (FG_DEBUG_ATTN_STEPS=1), twice;
#   3. phase stamps at KV 8192 (FG_DEBUG_ATTN_STAMPS=1; the split form's
#      merging block prints: "cluster" = publish + merge);
#   4. W-moe-12 and W-dense steps at KV 8192, the rule against 1-step tiles.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-c.sh 500  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
timeout 240 "$T" --gtest_filter='*GpuAttention*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|merge group" "$OUT/gtest.txt" | head -12
for f in "" "FG_DEBUG_ATTN_STEPS=1" "" "FG_DEBUG_ATTN_STEPS=1"; do
  [ "$(left)" -gt 220 ] || break
  echo "== attention ${f:-rule}"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T(1|2|4|8)(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,7,8,11
done
for w in dense moe; do
  [ "$(left)" -gt 150 ] || break
  FG_DEBUG_ATTN_STAMPS=1 FG_KERNEL_CACHE=/tmp/fgk-stamps timeout 60 fg_bench_kernels --reps 2 --no-cublas --pdl \
    --benchmark_filter="^attention/w-$w/kv8192/f16/T1(/|$)" > "$OUT/stamps-$w.txt" 2>&1
  echo "== stamps w-$w kv8192 (rc $?): $(stamps "$OUT/stamps-$w.txt")"
done
for round in 1 2; do
  stepf w-moe-12 "" --kv 8192 --ctx 16384
  stepf w-moe-12 "FG_DEBUG_ATTN_STEPS=1" --kv 8192 --ctx 16384
done
stepf w-dense "" --kv 8192 --ctx 16384
stepf w-dense "FG_DEBUG_ATTN_STEPS=1" --kv 8192 --ctx 16384
echo "call done after $((SECONDS - S)) s"
