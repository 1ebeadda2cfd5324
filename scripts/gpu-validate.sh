#!/usr/bin/env bash
# One GPU call's worth of validation (run from the repository root on the GPU machine, with the
# bundle in .gpu and the peers in .gpu/peers; writes into $OUT):
#   1. the whole GPU suite, and the PDL delay build (FG_DEBUG_PDL_DELAY_NS) over the entry-level tests
#   2. fusegraph-prev vs fusegraph vs ggml-cuda on W-dense, W-moe-12, W-tiny (+ breakdowns)
#   3. compute-sanitizer memcheck, racecheck, synccheck, initcheck over the whole suite, side by side
#   bash scripts/gpu-validate.sh [DEADLINE_S: the sanitizers stop by then, default 570]
set -uo pipefail
source .gpu/env.sh
export FG_KERNEL_CACHE=/tmp/fgk
S=$SECONDS
t() { echo "[$((SECONDS - S)) s] $*"; }
( bash .gpu/peers/ggml-bench.sh --model tiny --reps 3 > /tmp/ggml-build.txt 2>&1 ) &
ggml=$!
"$(command -v fusegraph_gpu_tests)" --gtest_brief=1 > "$OUT/gpu.txt" 2>&1; t "gpu suite rc $?"; tail -2 "$OUT/gpu.txt"; grep FAILED "$OUT/gpu.txt" | head
FG_KERNEL_CACHE=/tmp/fgk-delay FG_DEBUG_PDL_DELAY_NS=20000 "$(command -v fusegraph_gpu_tests)" --gtest_brief=1 \
  --gtest_filter='*Demo*:*Attention*:*Session*:*InputCheck*:Fused/*matmul*' > "$OUT/delay.txt" 2>&1
t "delay build rc $?"; grep -E "FAILED|PASSED" "$OUT/delay.txt" | head -5
wait $ggml; t "ggml built"
{
  for w in dense moe-12 tiny; do
    m=${w%-12}; l=; [ "$w" = moe-12 ] && l="--layers 12"
    echo "== ggml $w"; bash .gpu/peers/ggml-bench.sh --model "$m" $l --reps 200 2>&1 | grep RESULT
    echo "== prev w-$w"; fusegraph-prev bench --workload "w-$w" --compare fused,unfused,graph --steps 50 2>&1 | grep -E "graph-"
    echo "== now w-$w"; fusegraph bench --workload "w-$w" --compare fused,unfused,graph,nopdl --steps 50 2>&1 | grep -E "graph-|launches"
  done
  for w in w-tiny w-dense w-moe-12; do fusegraph bench --workload $w --compare fused,graph --breakdown --steps 20 2>&1 | sed -n '/per kernel family/,$p'; done
} > "$OUT/bench.txt" 2>&1
t "bench done"
timeout 90 bash bench/variant-sweep.sh /tmp/sweep '(matmul|fused.gated_matmul)/(w-dense|w-moe|unseen)/.*/f16/T[12]' > "$OUT/sweep.txt" 2>&1
t "sweep done"; tail -1 "$OUT/sweep.txt"
# One tool at a time (four side by side did not finish the suite in 270 s), each
# stopped at the deadline; TOOLS picks them, SHARD/SHARDS a gtest shard.
for tool in ${TOOLS:-memcheck racecheck synccheck initcheck}; do
  left=$(( ${1:-570} - (SECONDS - S) ))
  [ "$left" -gt 20 ] || break
  timeout "$left" bash scripts/gpu-sanitize.sh "$tool" "${SHARD:-0}" "${SHARDS:-1}" \
    "$(command -v fusegraph_gpu_tests)" > "/tmp/san-$tool.txt" 2>&1
  echo "exit $?" >> "/tmp/san-$tool.txt"
done
for tool in ${TOOLS:-memcheck racecheck synccheck initcheck}; do
  echo "== $tool"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|PASSED|FAILED|gpu-sanitize|^exit" "/tmp/san-$tool.txt" | tail -6
done > "$OUT/sanitize.txt"
t "sanitizers done"; cat "$OUT/sanitize.txt"
