#!/usr/bin/env bash
# The next session's second GPU call (written in the tenth, which had no
# device time): ggml-cuda built in the background (~4 min) while the other
# tenth-session changes are timed — moe_weighted_sum_add on W-moe-12/48,
# W-dense with every norm prologue forced (FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0)
# with and without the weight prefetch, W-moe-12's prefill with and without
# workspace slots, breakdowns of W-dense's step with the prefetch off and on —
# then ggml beside fusegraph on decode and on the prefill of 512 tokens, and
# compute-sanitizer (memcheck, racecheck) over the ninth session's new
# kernels and the tenth's prologues in the time left.
#   bash scripts/gpu-s10-call2.sh DEADLINE_S  (bundle with --peers, carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-570}
left() { echo $((D - (SECONDS - S))); }
export FG_KERNEL_CACHE=/tmp/fgk0
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
step() { # label env... (the command last)
  local label=$1; shift
  timeout 60 env "$@" > /tmp/b.txt 2>&1 || tail -2 /tmp/b.txt
  echo "$label $(grep -E 'graph-fused' /tmp/b.txt | head -1)"
}
{
for w in w-moe-12 w-moe-48; do
  step "$w moe_weighted_sum_add" fusegraph bench --workload $w --compare fused,graph --steps 50 --enable-fusion moe_weighted_sum_add
  step "$w default" fusegraph bench --workload $w --compare fused,graph --steps 50
done
for mb in 0 16; do
  step "w-dense all norm prologues mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb FG_DEBUG_NORM_PROLOGUE_SLOWDOWN=0 fusegraph bench --workload w-dense --compare fused,graph --steps 50
  step "w-dense default mb=$mb" FG_DEBUG_PDL_PREFETCH_MB=$mb fusegraph bench --workload w-dense --compare fused,graph --steps 50
done
for slots in 1 3; do
  echo "== w-moe-12 prefill 512, FG_DEBUG_WORKSPACE_SLOTS=$slots"
  FG_DEBUG_WORKSPACE_SLOTS=$slots timeout 60 fusegraph bench --workload w-moe-12 --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1
  grep -E "prefill_512  " /tmp/p.txt
done
for mb in 0 16; do
  echo "== w-dense breakdown mb=$mb"
  FG_DEBUG_PDL_PREFETCH_MB=$mb timeout 60 fusegraph bench --workload w-dense --compare fused,graph --steps 20 --breakdown > /tmp/bd.txt 2>&1
  sed -n '/graph-fused/,$p' /tmp/bd.txt | head -24
done
} 2>&1 | tee "$OUT/steps.txt"
wait $ggml; echo "ggml built after $((SECONDS - S)) s"
{
gm() { case $1 in dense) echo "--model dense" ;; moe12) echo "--model moe --layers 12" ;; tiny) echo "--model tiny" ;; esac; }
for w in dense:w-dense moe12:w-moe-12 tiny:w-tiny; do
  [ $(left) -gt 120 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f decode"; timeout 60 bash .gpu/peers/ggml-bench.sh $(gm $m) --reps 200 2>&1 | grep RESULT
  step "fusegraph $f mb=0" FG_DEBUG_PDL_PREFETCH_MB=0 fusegraph bench --workload $f --compare fused,graph --steps 50
  step "fusegraph $f mb=16" FG_DEBUG_PDL_PREFETCH_MB=16 fusegraph bench --workload $f --compare fused,graph --steps 50
done
for w in dense:w-dense moe12:w-moe-12; do
  [ $(left) -gt 100 ] || break
  m=${w%%:*}; f=${w#*:}
  echo "== ggml $f prefill 512"; timeout 90 bash .gpu/peers/ggml-bench.sh $(gm $m) --tokens 512 --L 0 --reps 10 2>&1 | grep RESULT
  echo "== fusegraph $f prefill 512"
  timeout 60 fusegraph bench --workload $f --prefill 512 --steps 5 --warmup 2 > /tmp/p.txt 2>&1; grep -E "prefill_512  " /tmp/p.txt
done
} 2>&1 | tee "$OUT/peers.txt"
NEW='GpuFlashPrefill*:*rope_prefill*:*matmul_add_prefill*:*rms_norm_mul_convert*:GpuAttention.*'
for tool in memcheck racecheck; do
  [ $(left) -gt 50 ] || break
  FG_DEBUG_PDL_PREFETCH_MB=16 GTEST_EXTRA="--gtest_filter=$NEW" timeout $(( $(left) / 2 )) bash scripts/gpu-sanitize.sh $tool > "$OUT/sanitize-$tool.txt" 2>&1
  echo "$tool rc $? after $((SECONDS - S)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitize-$tool.txt" | tr '\n' ' ' | head -c 600)"
done
echo "done after $((SECONDS - S)) s"
