#!/usr/bin/env bash
# Thirty-sixth session, call 3 (also: q loaded before the position with a
# rope too, rotated after it: rope_kv_attention's A/B again): the token launch at 1024 threads a block (the
# draw's one block gets four times the warps) against 256
# (FG_DEBUG_GREEDY_THREADS=256, same binary, alternating): greedy and drawn
# steps; the greedy / sampling / session tests at the new default.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s36-b.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-330}
source scripts/gpu-call-lib.sh
timeout 200 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling*:GpuSession*:GpuInputCheck*:GpuDemo.FusedEqualsUnfused64Steps:*rope_kv_attention*:*rope_attention*:Grid/GpuAttention.DecodeStep*:GpuAttentionEarly*:GpuAttentionReplay*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
grep -E "^\[  FAILED|Failure|^vocab" "$OUT/gtest.txt" | head -12
for round in 1 2; do
  for w in w-tiny w-dense; do
    [ "$(left)" -gt 120 ] || break
    stepf $w ""
    stepf $w "FG_DEBUG_GREEDY_THREADS=256"
  done
  for args in "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1" "--temperature 0.8 --seed 1"; do
    [ "$(left)" -gt 100 ] || break
    stepf w-tiny "" $args
    stepf w-tiny "FG_DEBUG_GREEDY_THREADS=256" $args
  done
done
for w in w-tiny w-dense; do
  [ "$(left)" -gt 90 ] || break
  stepf $w "" --enable-fusion rope_kv_attention
  stepf $w ""
done
stepf w-dense "" --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
stepf w-dense "FG_DEBUG_GREEDY_THREADS=256" --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "FG_DEBUG_GREEDY_THREADS=256"
for envs in "" "FG_DEBUG_GREEDY_THREADS=256"; do
  [ "$(left)" -gt 40 ] || break
  env $envs timeout 60 fusegraph run w-tiny --device cuda --prompt-ids 1,2,3,4 --steps 400 --ignore-eos --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 > /tmp/r.txt 2>&1
  echo "== run w-tiny drawn ${envs:-default} (rc $?): $(grep -E '^tokens:' /tmp/r.txt | md5sum | cut -c1-12) $(grep -E '^decode' /tmp/r.txt | tail -1)"
done
echo "call done after $((SECONDS - S)) s"
