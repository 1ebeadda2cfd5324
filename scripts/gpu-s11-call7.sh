#!/usr/bin/env bash
# The eleventh session's last GPU call: quantised prefill (issue 15 item 4,
# never measured: prefill matmuls dequantise their weight tiles with the
# GEMV's block decoders into scratch and call cuBLAS), W-dense and W-moe-12
# in q4_K at 512 tokens with their breakdowns, f16 beside them as the anchor
# of the second call's ggml ratio (ggml is not rebuilt: 4 minutes of device
# time this session does not have).
#   bash scripts/gpu-s11-call7.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-250}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
for w in w-dense w-dense-q4_k w-moe-12-q4_k w-moe-12; do
  [ $(left) -gt 25 ] || break
  echo "== $w prefill 512"
  timeout $(( $(left) - 10 )) fusegraph bench --workload $w --prefill 512 --steps 5 --warmup 2 --breakdown > "$OUT/$w.txt" 2>&1
  echo "rc $? after $((SECONDS - S)) s"
  grep -E "prefill_512  |^  [a-z]" "$OUT/$w.txt" | head -14
done
echo "done after $((SECONDS - S)) s"
