#!/usr/bin/env bash
# The sixth session's last call: the GPU tests that the previous call's
# whole-suite run did not reach (its cold kernel cache ran out the time),
# in two shards, one per GPU; then memcheck (GPU 0) and racecheck (GPU 1) over
# the tests added this session. .gpu/rest-filter.txt holds the negative
# filter of the tests that passed.
#   bash scripts/gpu-rest-s6.sh DEADLINE_S
set -uo pipefail
source .gpu/env.sh
S=$SECONDS; D=${1:-320}
left() { echo $((D - (SECONDS - S))); }
T=$(command -v fusegraph_gpu_tests)
NEW='GpuFused*matmul_multi*:GpuQuantGemv.Q4_0AndQ8_0Wide*'
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$ngpu" -ge 2 ] || ngpu=1
pids=()
for g in $(seq 0 $((ngpu - 1))); do
  ( export CUDA_VISIBLE_DEVICES=$g FG_KERNEL_CACHE=/tmp/fgk$g GTEST_SHARD_INDEX=$g GTEST_TOTAL_SHARDS=$ngpu
    timeout $(( $(left) - 70 )) "$T" --gtest_filter="$(cat .gpu/rest-filter.txt)" > "$OUT/rest-$g.txt" 2>&1
    echo "rest shard $g rc $? after $((SECONDS - S)) s" >> "$OUT/rest-$g.txt"
    unset GTEST_SHARD_INDEX GTEST_TOTAL_SHARDS
    tool=memcheck; [ $g = 1 ] && tool=racecheck
    if [ $(left) -gt 30 ]; then
      GTEST_EXTRA="--gtest_filter=$NEW" timeout $(( $(left) - 8 )) bash scripts/gpu-sanitize.sh $tool 0 1 "$T" > "$OUT/san-$tool.txt" 2>&1
      echo "exit $? after $((SECONDS - S)) s" >> "$OUT/san-$tool.txt"
    fi ) &
  pids+=($!)
done
wait "${pids[@]}"
for f in "$OUT"/rest-*.txt; do echo "$(basename $f): $(grep -cE '^\[       OK' $f) ok, $(grep -cE '^\[  SKIPPED \]' $f) skipped; $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|rc ' $f | tr '\n' ' ')"; done
for f in "$OUT"/san-*.txt; do [ -f "$f" ] && echo "$(basename $f): $(grep -cE 'OK \]' $f) ok; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^exit|FAILED  \]' $f | tr '\n' ' ')"; done
