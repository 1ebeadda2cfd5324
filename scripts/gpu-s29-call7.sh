#!/usr/bin/env bash
# Twenty-ninth session, last call: fusegraph beside ggml-cuda in one call (the
# first side-by-side since the twenty-second session), gated_gemm on by
# default. ggml builds on the CPUs (about 4 minutes) while fusegraph's decode
# steps and prefills run; then ggml's same workloads. nvidia-smi dmon records
# clocks and power during W-dense's 512-token prefill loop.
#   bash scripts/gpu-s29-call7.sh DEADLINE_S  (carry [".gpu"]; bundle with --peers)
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
ggml=$!
{
stepf w-dense ""
stepf w-moe-12 ""
stepf w-tiny ""
stepf w-dense-q4_k ""
stepf w-moe-12-q4_k ""
pre w-dense "" --steps 5 --warmup 2
pre w-dense-q4_k "" --steps 5 --warmup 2
pre w-moe-12 "" --steps 5 --warmup 2
(command -v nvidia-smi > /dev/null && timeout 40 nvidia-smi dmon -s pc -d 1 -c 25 > "$OUT/dmon.txt" 2>&1) &
dm=$!
sleep 1
pre w-dense "" --steps 1500 --warmup 2
wait $dm
echo "dmon (power W, sm MHz, mem MHz) during 1500 prefills:"; grep -vE "^#" "$OUT/dmon.txt" | awk '{print $2, $3, $4}' | tr '\n' ';' | head -c 600; echo
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s: $(tail -1 /tmp/ggml-build.txt)"
{
for spec in "dense --wtype f16" "moe --layers 12 --wtype f16" "tiny" "dense --wtype q4_K" "moe --layers 12 --wtype q4_K"; do
  [ "$(left)" -gt 30 ] || break
  echo "== ggml $spec: $(timeout 60 bash .gpu/peers/ggml-bench.sh --model $spec --reps 200 2>&1 | grep RESULT)"
done
for spec in "dense --wtype f16" "dense --wtype q4_K" "moe --layers 12 --wtype f16"; do
  [ "$(left)" -gt 40 ] || break
  echo "== ggml prefill 512 $spec: $(timeout 60 bash .gpu/peers/ggml-bench.sh --model $spec --L 0 --tokens 512 --reps 20 2>&1 | grep RESULT)"
done
stepf w-dense ""
} 2>&1 | tee -a "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
