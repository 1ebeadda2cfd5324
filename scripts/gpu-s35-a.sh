#!/usr/bin/env bash
# Thirty-fifth session, call 1 (written without a GPU): the device's seeded
# draw (kernels/sample.cuh) under its tests, memcheck and racecheck; the
# greedy steps of the previous build (fusegraph-prev, c99a3a2) against this
# one (the token launch holds the draw's shared memory only while drawing); a
# sampled `run` drawing on the device against one drawing on the host; then
# the thirty-fourth session's flash-prefill call (gpu-s34-a.sh) with what is
# left.
#   bash scripts/gpu-bundle.sh --prev /tmp/prev/build
#   bash scripts/gpu-s35-a.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 150 fusegraph_gpu_tests --gtest_filter='GpuSampling*:GpuGreedyToken*:GpuSession*' > "$OUT/gtest-sample.txt" 2>&1
echo "== sampling tests (rc $?): $(summ "$OUT/gtest-sample.txt")"
grep -E "^vocab|^\[  FAILED|Failure" "$OUT/gtest-sample.txt" | head -20
timeout 120 compute-sanitizer --tool memcheck fusegraph_gpu_tests --gtest_filter='GpuSampling.DeviceDraw*OneBlock:GpuSampling.SessionDraws*' > "$OUT/memcheck-sample.txt" 2>&1
echo "== memcheck (rc $?): $(summ "$OUT/memcheck-sample.txt")"
timeout 120 compute-sanitizer --tool racecheck fusegraph_gpu_tests --gtest_filter='GpuSampling.DeviceDraw*OneBlock' > "$OUT/racecheck-sample.txt" 2>&1
echo "== racecheck (rc $?): $(summ "$OUT/racecheck-sample.txt")"
# Greedy steps: the previous build against this one.
for round in 1 2; do
  for w in w-tiny w-moe-12-q4_k; do
    [ "$(left)" -gt 300 ] || break
    timeout 75 fusegraph-prev bench --workload $w --compare fused,graph --steps 30 > /tmp/p.txt 2>&1
    echo "== prev $w (rc $?): $(grep -E '^graph' /tmp/p.txt | awk '{print $1, $2}')"
    stepf $w ""
  done
done
# What the draw costs a step (bench: every step's token drawn on the device),
# and the token launch's time in the breakdown, greedy and drawn.
for w in w-tiny w-dense; do
  for args in "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1" "--temperature 0.8 --seed 1" \
              "--temperature 0.8 --top-p 0.95 --seed 1"; do
    stepf $w "" $args
  done
done
for args in "" "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1"; do
  [ "$(left)" -gt 300 ] || break
  timeout 75 fusegraph bench --workload w-tiny --compare fused,graph --steps 30 --breakdown $args > /tmp/b.txt 2>&1
  echo "== breakdown w-tiny ${args:-greedy} (rc $?): $(grep -E '^graph' /tmp/b.txt | awk '{print $1, $2}') $(grep -iE 'greedy|token' /tmp/b.txt | tr -s ' ' | head -2 | tr '\n' ';')"
done
# A sampled decode: drawn on the device (pipelined: top-k 40), on the device
# without the pipeline, and on the host from copied rows (--dump-logits).
for args in "" "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 7" \
            "--temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --no-pipeline" \
            "--temperature 0.8 --top-p 0.95 --seed 7"; do
  [ "$(left)" -gt 280 ] || break
  timeout 60 fusegraph run w-tiny --device cuda --prompt-ids 1,2,3,4 --steps 400 --ignore-eos --verbose $args > /tmp/r.txt 2>&1
  echo "== run w-tiny ${args:-greedy} (rc $?): $(grep -E 'drawn on the device|^decode' /tmp/r.txt | tail -2 | tr '\n' ' ')"
done
timeout 60 fusegraph run w-tiny --device cuda --prompt-ids 1,2,3,4 --steps 400 --ignore-eos --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --all-logits --dump-logits /tmp/l.bin > /tmp/r.txt 2>&1
echo "== run w-tiny, host draws (rc $?): $(grep -E '^decode' /tmp/r.txt | tail -2 | tr '\n' ' ')"
echo "sampling part done after $((SECONDS - S)) s"
[ "$(left)" -gt 330 ] && bash scripts/gpu-s34-a.sh "$(left)"
echo "call done after $((SECONDS - S)) s"
