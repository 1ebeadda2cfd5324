#!/usr/bin/env bash
# The first GPU call of the next session (written at the end of the ninth):
# 1. ggml-cuda built in the background (~4 min) while compute-sanitizer
#    (memcheck, then racecheck) runs over the ninth session's new kernels —
#    the flash prefill with ldmatrix and two cp.async stages, prefill ropes by
#    head groups, the cuBLASLt matmul_add, the 16-bit norms — which no
#    sanitizer has seen yet (issue 15 asks "compute-sanitizer clean");
# 2. ggml-cuda beside fusegraph on the prefill of 512 tokens (W-dense,
#    W-moe-12; ggml was last measured in the sixth session) and on decode
#    steps (W-dense, W-moe-12, W-tiny), all in this one call.
# Bundle with `bash scripts/gpu-bundle.sh --peers`, then run with carry
# [".gpu"]:  bash scripts/gpu-next-call.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
NEW='GpuFlashPrefill*:*rope_prefill*:*matmul_add_prefill*:*rms_norm_mul_convert*'
for tool in memcheck racecheck; do
  GTEST_EXTRA="--gtest_filter=$NEW" timeout 150 bash scripts/gpu-sanitize.sh $tool > "$OUT/sanitize-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitize-$tool.txt" | tr '\n' ' ')"
done
wait $ggml; echo "ggml built after $((SECONDS - S)) s"
{
# ggml's W-moe-12 is its moe model with 12 layers.
gm() { case $1 in dense) echo "--model dense" ;; moe12) echo "--model moe --layers 12" ;; tiny) echo "--model tiny" ;; esac; }
for w in dense:w-dense moe12:w-moe-12; do
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f prefill 512"; timeout 90 bash .gpu/peers/ggml-bench.sh $(gm $m) --tokens 512 --L 0 --reps 10 2>&1 | grep RESULT
  echo "== fusegraph $f prefill 512"
  timeout 60 fusegraph bench --workload $f --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1; grep -E "prefill_512  " /tmp/p.txt
done
for w in dense:w-dense moe12:w-moe-12 tiny:w-tiny; do
  [ $(left) -gt 40 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f decode"; timeout 60 bash .gpu/peers/ggml-bench.sh $(gm $m) --reps 200 2>&1 | grep RESULT
  echo "== fusegraph $f decode"
  timeout 60 fusegraph bench --workload $f --compare fused,graph --steps 50 > /tmp/b.txt 2>&1; grep -E "graph-fused" /tmp/b.txt
done
} 2>&1 | tee "$OUT/peers.txt"
