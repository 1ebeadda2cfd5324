#!/usr/bin/env bash
# Thirty-sixth session, call 3, short (362 s of device time left): the token
# launch at 1024 threads against 256 (FG_DEBUG_GREEDY_THREADS=256, same
# binary), greedy and drawn; rope_kv_attention once more; the greedy and
# sampling tests at 1024.
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s36-c.sh 170  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-170}
source scripts/gpu-call-lib.sh
timeout 40 "$T" --gtest_filter='GpuGreedyToken*:GpuSampling.DeviceDraw*:*rope_kv_attention_neox128_g4_ctx1500_p1021*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
for round in 1 2; do
  stepf w-tiny ""
  stepf w-tiny "FG_DEBUG_GREEDY_THREADS=256"
done
for args in "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1" "--temperature 0.8 --seed 1"; do
  stepf w-tiny "" $args
  stepf w-tiny "FG_DEBUG_GREEDY_THREADS=256" $args
done
stepf w-tiny "" --enable-fusion rope_kv_attention
stepf w-tiny ""
stepf w-dense ""
stepf w-dense "FG_DEBUG_GREEDY_THREADS=256"
echo "call done after $((SECONDS - S)) s"
