#!/usr/bin/env bash
# The eleventh session's fifth GPU call: fused.rope_attention (q's rope in
# decode attention's q load) checked and timed.
# 1. Its GpuFused cases and the tests whose plans it changes (W-tiny, W-dense
#    and the dense families decode through it), then memcheck over its cases;
# 2. decode steps with it (the default) and without it
#    (--disable-fusion rope_attention), interleaved, three rounds, on W-tiny,
#    W-dense and W-moe-12 (no plain q rope there: the control);
# 3. W-tiny's breakdown with and without it.
#   bash scripts/gpu-s11-call5.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-440}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
timeout 170 "$T" --gtest_filter='*rope_attention*:GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuAttention.*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure' "$OUT/tests.txt" | head -12 | tr '\n' ' ')"
step() { # label env... (the command last)
  local label=$1; shift
  timeout 60 env "$@" > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
  echo "$label $(grep -E 'graph-fused' /tmp/b.txt | head -1)"
}
{
for round in 1 2 3; do
  for w in w-tiny w-dense w-moe-12; do
    [ $(left) -gt 90 ] || break 2
    step "$w r$round without" fusegraph bench --workload $w --compare fused,graph --steps 50 --disable-fusion rope_attention
    step "$w r$round with" fusegraph bench --workload $w --compare fused,graph --steps 50
  done
done
for flag in "--disable-fusion rope_attention" ""; do
  [ $(left) -gt 60 ] || break
  echo "== w-tiny breakdown ${flag:-default}"
  timeout 60 fusegraph bench --workload w-tiny --compare fused,graph --steps 20 --breakdown $flag > /tmp/bd.txt 2>&1
  sed -n '/graph-fused/,$p' /tmp/bd.txt | head -16
done
} 2>&1 | tee "$OUT/steps.txt"
if [ $(left) -gt 40 ]; then
  FG_UNDER_SANITIZER=memcheck timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck --print-limit 5 \
    "$T" --gtest_filter='*rope_attention*' > "$OUT/memcheck.txt" 2>&1
  echo "memcheck rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|PASSED|FAILED  \]' "$OUT/memcheck.txt" | tr '\n' ' ')"
fi
echo "done after $((SECONDS - S)) s"
