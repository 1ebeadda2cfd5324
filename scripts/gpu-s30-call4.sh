#!/usr/bin/env bash
# Thirtieth session: prefill timed at positions 0 .. N-1 every step (the
# bench had advanced the positions like decode, so 3 of 4 W-dense 512-token
# steps ran attention over 1-2 K keys), beside ggml's `--L 0` prefills in the
# same call. ggml builds on the CPUs while fusegraph's prefills run.
#   bash scripts/gpu-s30-call4.sh DEADLINE_S  (carry [".gpu"]; bundle with --peers)
set -uo pipefail
source .gpu/env.sh
D=${1:-540}
source scripts/gpu-call-lib.sh
( nice -n 5 bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1; echo "ggml build rc $?" >> /tmp/ggml-build.txt ) &
ggml=$!
{
pre w-dense "" --steps 7 --warmup 2 --breakdown
grep -E "^  [a-z]" /tmp/pre.txt | head -12
pre w-dense-q4_k "" --steps 7 --warmup 2
pre w-moe-12 "" --steps 7 --warmup 2
pre w-moe-12-q4_k "" --steps 7 --warmup 2 --breakdown
grep -E "^  [a-z]" /tmp/pre.txt | head -12
PRE=2048 pre w-dense "" --steps 5 --warmup 2 --breakdown
grep -E "^  [a-z]" /tmp/pre.txt | head -12
PRE=2048 pre w-moe-12 "" --steps 5 --warmup 2
PRE=2048 pre w-moe-12-q4_k "" --steps 5 --warmup 2
PRE=64 pre w-dense "" --steps 7 --warmup 2
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s: $(tail -1 /tmp/ggml-build.txt)"
{
for spec in "dense --wtype f16 --tokens 512" "dense --wtype q4_K --tokens 512" "moe --layers 12 --wtype f16 --tokens 512" "moe --layers 12 --wtype q4_K --tokens 512" "dense --wtype f16 --tokens 2048" "moe --layers 12 --wtype f16 --tokens 2048"; do
  [ "$(left)" -gt 40 ] || break
  echo "== ggml prefill $spec: $(timeout 80 bash .gpu/peers/ggml-bench.sh --model $spec --L 0 --reps 10 2>&1 | grep RESULT)"
done
pre w-dense "" --steps 7 --warmup 2
} 2>&1 | tee -a "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
