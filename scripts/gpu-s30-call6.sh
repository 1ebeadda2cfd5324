#!/usr/bin/env bash
# Thirtieth session, call 6: fused.attention_convert (the flash kernel
# stores the o GEMM's f16 rows; gemm-inputs converts attention's rows before
# their reshape) and the flash kernel's S order on by default — GPU tests
# (with memcheck on the new store), prefills with and without the pattern
# alternating, and ggml-cuda's prefills in the same call (it builds on the
# CPUs meanwhile).
#   bash scripts/gpu-s30-call6.sh DEADLINE_S  (carry [".gpu"]; bundle with --peers)
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
ggml=$!
{
timeout 200 fusegraph_gpu_tests --gtest_filter='GpuFused*:*Prefill*:GpuDemo*:*gated_gemm*:*GemmPair*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
timeout 120 compute-sanitizer --tool memcheck fusegraph_gpu_tests --gtest_filter='GpuFused*attention_convert*' > /tmp/mc.txt 2>&1
echo "== memcheck (rc $?): $(summ /tmp/mc.txt)"
for n in 512 2048; do
  for envs in "" "X" "" "X"; do
    if [ "$envs" = X ]; then PRE=$n pre w-dense "" --steps 5 --warmup 2 --breakdown --disable-fusion attention_convert
    else PRE=$n pre w-dense "" --steps 5 --warmup 2 --breakdown; fi
    grep -E "^  attention|^  fused.attention_convert|^  convert" /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
  done
done
PRE=2048 pre w-dense "FG_DEBUG_FLASH_KS_OUTER=0" --steps 5 --warmup 2
pre w-dense-q4_k "" --steps 7 --warmup 2
pre w-moe-12 "" --steps 7 --warmup 2
PRE_TIMEOUT=150 pre w-moe-12-q4_k "" --steps 7 --warmup 2
PRE=2048 pre w-moe-12 "" --steps 5 --warmup 2
stepf w-dense ""
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s: $(tail -1 /tmp/ggml-build.txt)"
{
for spec in "dense --wtype f16 --tokens 512" "dense --wtype f16 --tokens 2048" "dense --wtype q4_K --tokens 512" "moe --layers 12 --wtype f16 --tokens 512" "moe --layers 12 --wtype q4_K --tokens 512"; do
  [ "$(left)" -gt 40 ] || break
  echo "== ggml prefill $spec: $(timeout 80 bash .gpu/peers/ggml-bench.sh --model $spec --L 0 --reps 10 2>&1 | grep RESULT | grep -o 'median_ms=[0-9.]*')"
done
PRE=2048 pre w-dense "" --steps 5 --warmup 2
pre w-dense "" --steps 7 --warmup 2
} 2>&1 | tee -a "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
