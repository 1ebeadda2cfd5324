#!/usr/bin/env bash
# The eleventh session's third GPU call, over the new defaults (prefetch
# prologues at 16 MiB with the 4 MiB weight limit; moe_weighted_sum_add on):
# 1. GpuDemo.TeacherForced1000StepsMatchReference under memcheck, which
#    failed at step 448 in the second call with every prologue on (16 MiB,
#    no limit) and 0 memcheck errors: the defaults, no prologue, attention's
#    alone, the GEMVs' alone, and the defaults again;
# 2. the GPU tests the defaults touch;
# 3. the previous defaults against the new on three workloads, interleaved.
#   bash scripts/gpu-s11-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
T=$(command -v fusegraph_gpu_tests)
mc() { # label env...
  local label=$1; shift
  timeout 120 env "$@" FG_UNDER_SANITIZER=memcheck compute-sanitizer --tool memcheck --print-limit 5 \
    "$T" --gtest_filter='GpuDemo.TeacherForced1000StepsMatchReference' > /tmp/mc.txt 2>&1
  echo "memcheck $label rc $? after $((SECONDS - S)) s: $(grep -E 'Failure|step [0-9]|actual|ERROR SUMMARY|PASSED|worst' /tmp/mc.txt | tr '\n' ' ' | head -c 400)"
}
{
mc "defaults"
mc "no prologue" FG_DEBUG_PDL_PREFETCH_MB=0
mc "attention only" FG_DEBUG_PDL_PREFETCH_MAX_MB=0
mc "gemv only, no limit" FG_DEBUG_PDL_PREFETCH_ATTN=0 FG_DEBUG_PDL_PREFETCH_MAX_MB=1024
mc "defaults again"
mc "no prologue again" FG_DEBUG_PDL_PREFETCH_MB=0
} 2>&1 | tee "$OUT/memcheck.txt"
timeout $(( $(left) - 120 )) "$T" --gtest_filter='GpuDemo*:GpuSession*:GpuPrefillThenDecode*:GpuAttention*:*moe*:*Moe*:GpuFused*:GpuWorkload*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? after $((SECONDS - S)) s: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/tests.txt" | head -12 | tr '\n' ' ')"
step() { # label env... (the command last)
  local label=$1; shift
  timeout 60 env "$@" > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
  echo "$label $(grep -E 'graph-fused' /tmp/b.txt | head -1)"
}
{
for round in 1 2; do
  for w in w-tiny w-moe-12 w-dense; do
    [ $(left) -gt 15 ] || break 2
    step "$w r$round previous" FG_DEBUG_PDL_PREFETCH_MB=0 fusegraph bench --workload $w --compare fused,graph --steps 50 --disable-fusion moe_weighted_sum_add
    step "$w r$round new" fusegraph bench --workload $w --compare fused,graph --steps 50
  done
done
} 2>&1 | tee "$OUT/steps.txt"
echo "done after $((SECONDS - S)) s"
