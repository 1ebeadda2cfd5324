#!/usr/bin/env bash
# The thirty-eighth session's fifth call: two sweeps of existing switches.
#   1. f16 GEMVs at T = 1 with --pdl (W-moe q / o at 16.8 MB: 78 % against
#      issue 11's 80 %): the rule against rows, unroll, warps and the tensor
#      cores at one row (--gemv-*), twice the rule;
#   2. decode attention at KV 8192 / 32768 with fewer splits (one block an
#      SM, or splits of at least 4 tiles a warp).
#   bash scripts/gpu-bundle.sh && bash scripts/gpu-s38-e.sh 300  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
for f in "" "--gemv-rows 8" "--gemv-rows 2" "--gemv-unroll 1" "--gemv-unroll 4" "--gemv-warps 2" \
         "--gemv-warps 8" "--gemv-tc-min 1" ""; do
  [ "$(left)" -gt 100 ] || break
  echo "== gemv ${f:-rule}"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl $f --table /tmp/k.md \
    --benchmark_filter='^matmul/w-(moe|dense)/(q|o|k)/f16/T1(/|$)' > /tmp/k.txt 2>&1
  grep -E "^\| matmul" /tmp/k.md | cut -d'|' -f3,4,8,11 | tr '\n' ';'; echo
done
for f in "" "FG_DEBUG_ATTN_BLOCKS_PER_SM=1" "FG_DEBUG_ATTN_MIN_TILES=4" "FG_DEBUG_ATTN_MIN_TILES=2"; do
  [ "$(left)" -gt 30 ] || break
  echo "== attention ${f:-rule}"
  env $f timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter='^attention/w-(dense|moe)/kv(8192|32768)/f16/T1(/|$)' > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f3,4,8,11 | tr '\n' ';'; echo
done
echo "call done after $((SECONDS - S)) s"
