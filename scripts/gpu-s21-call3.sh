#!/usr/bin/env bash
# The twenty-first session's third GPU call: ggml-cuda beside fusegraph in
# one run, decode at KV 1024 (W-moe-12 q4_K / q8_0 / f16, W-dense q4_K,
# W-tiny): ggml is built in the background (~4 min) while fusegraph's steps
# run, with each of this session's MoE fusions off once for the ratio.
#   bash scripts/gpu-s21-call3.sh DEADLINE_S  (bundle with --peers, carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
{
stepf w-moe-12-q4_k ""
stepf w-moe-12-q4_k "" --disable-fusion rms_norm_matmul_topk_moe,matmul_id_sum_add
stepf w-moe-12-q8_0 ""
stepf w-moe-12 ""
stepf w-dense-q4_k ""
stepf w-tiny ""
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s: $(tail -1 /tmp/ggml-build.txt)"
{
for spec in "moe --layers 12 --wtype q4_K" "moe --layers 12 --wtype q8_0" "moe --layers 12 --wtype f16" "dense --wtype q4_K" "tiny"; do
  [ "$(left)" -gt 40 ] || break
  echo "== ggml $spec: $(timeout 60 bash .gpu/peers/ggml-bench.sh --model $spec --reps 200 2>&1 | grep RESULT)"
done
stepf w-moe-12-q4_k ""
} 2>&1 | tee -a "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
