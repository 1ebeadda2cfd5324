#!/usr/bin/env bash
# The twenty-second session's second GPU call: ggml-cuda beside fusegraph in
# one run at this session's defaults (ggml built in the background, ~4 min,
# while the expert GEMVs' work splits are swept and fusegraph's steps run),
# decode at KV 1024: W-moe-12 q4_K / q8_0 / f16, W-dense q4_K / f16, W-tiny.
#   bash scripts/gpu-s22-call2.sh DEADLINE_S  (bundle with --peers, carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
KERN_MIN_LEFT=250
E='--benchmark_filter=^fused.(gated_matmul_id|matmul_id_sum_add)/w-moe/.*/(q4_k|q8_0)/T1(/|$)'
{
kern "experts default" "$E"
kern "experts 2 ahead" --gemv-dp4a-ahead=2 "$E"
kern "experts 1 row a warp" --gemv-dp4a-unroll=1 "$E"
kern "experts 4 rows a warp" --gemv-dp4a-unroll=4 "$E"
kern "experts 24 warps an SM" --gemv-dp4a-warps=24 "$E"
kern "experts 32 warps an SM" --gemv-dp4a-warps=32 "$E"
kern "experts whole-warp loads" --gemv-dp4a-warp-load "$E"
} 2>&1 | tee "$OUT/kernels.txt"
{
stepf w-moe-12-q4_k ""
stepf w-moe-12-q8_0 ""
stepf w-moe-12 ""
stepf w-dense-q4_k ""
stepf w-dense ""
stepf w-tiny ""
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s: $(tail -1 /tmp/ggml-build.txt)"
{
for spec in "moe --layers 12 --wtype q4_K" "moe --layers 12 --wtype q8_0" "moe --layers 12 --wtype f16" "dense --wtype q4_K" "dense --wtype f16" "tiny"; do
  [ "$(left)" -gt 30 ] || break
  echo "== ggml $spec: $(timeout 60 bash .gpu/peers/ggml-bench.sh --model $spec --reps 200 2>&1 | grep RESULT)"
done
stepf w-moe-12-q4_k ""
} 2>&1 | tee -a "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
