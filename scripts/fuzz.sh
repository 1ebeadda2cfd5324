#!/usr/bin/env bash
# The CI fuzz step: runs each libFuzzer target of a FG_FUZZ build (scripts/build-asan.sh)
# for a bounded time, from the seeds the fuzz-seeds tests write plus fuzz/corpus/<target>/,
# and fails on any finding (crash, sanitizer report, leak, timeout, memory limit).
#   bash scripts/fuzz.sh [SECONDS]     (per target, default 60; BUILD_DIR=build-asan;
#                                       FUZZ_TARGETS="gguf hf fg plan")
# A finding is saved as $BUILD_DIR/fuzz/findings/<target>-crash-<sha1> (or leak-, timeout-,
# oom-); replay it with  $BUILD_DIR/fuzz/fg_fuzz_<target> FILE  or  fg_replay_<target> FILE.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build-asan}"
secs="${1:-${FUZZ_SECONDS:-60}}"
targets="${FUZZ_TARGETS:-gguf hf fg plan}"
seeds="$build/fuzz/seeds"
findings="$build/fuzz/findings"

# The seeds are written by ctest (fuzz-seeds); write them here when it has not run.
if [[ ! -d "$seeds/plan" ]]; then
  python3 fuzz/gen_seeds.py "$seeds" && "$build/fuzz/fg_fuzz_seeds" "$seeds" ||
    { echo "fuzz: cannot write the seeds" >&2; exit 1; }
fi
rm -rf "$findings" && mkdir -p "$findings"

failed=()
for t in $targets; do
  bin="$build/fuzz/fg_fuzz_$t"
  [[ -x "$bin" ]] || { echo "fuzz: no $bin (configure with -DFG_FUZZ=ON)" >&2; exit 1; }
  # A fresh working corpus: the checked-in inputs less those pending a fix
  # elsewhere (fuzz/pending.txt), which would stop the run before it starts.
  work="$build/fuzz/work/$t"
  rm -rf "$work" && mkdir -p "$work"
  for f in fuzz/corpus/"$t"/*; do
    [[ -f "$f" ]] || continue
    grep -q "^$t/$(basename "$f")[[:space:]]" fuzz/pending.txt && continue
    cp "$f" "$work/"
  done
  log="$build/fuzz/$t.log"
  start=$SECONDS
  # -max_len caps inputs (the seeds are at most a few tens of KiB, 75 KiB for a plan); -rss_limit_mb and
  # -malloc_limit_mb turn runaway allocations into findings instead of hangs or swapping;
  # -timeout (seconds per input) turns hangs into findings.
  maxlen=65536
  [[ $t == plan ]] && maxlen=131072 # the seed plan with a CUDA program holds cubin + PTX
  "$bin" -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$findings/$t-" \
    "$work" "$seeds/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if ((rc != 0)); then
    failed+=("$t")
    echo "fuzz $t: FINDING after $((SECONDS - start)) s (exit $rc); log $log:"
    grep -m1 -E 'ERROR: |runtime error:|fuzz invariant broken|ALARM|out-of-memory|malloc\(' "$log" || true
    grep -E '^ +#[0-9]+ ' "$log" | head -12
    ls "$findings"/"$t"-* 2>/dev/null
  else
    echo "fuzz $t: ok, ${execs:-?} inputs in $((SECONDS - start)) s, corpus $(ls "$work" | wc -l) files"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]} (inputs under $findings)"
  exit 1
fi
echo "fuzz: no findings"
