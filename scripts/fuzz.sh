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
  maxlen=65536
  [[ $t == plan ]] && maxlen=131072 # the seed plan with a CUDA program holds cubin + PTX
  # -max_len caps inputs (the seeds are at most a few tens of KiB, 75 KiB for a plan);
  # -rss_limit_mb and -malloc_limit_mb turn runaway allocations into findings instead of
  # hangs or swapping; -timeout (seconds per input) turns hangs into findings. Fork mode
  # with -ignore_*: a finding does not end the run, so one known bug cannot hide others
  # for the rest of the time; every finding is saved and fails the step.
  "$bin" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$findings/$t-" \
    "$work" "$seeds/$t" >"$log" 2>&1
  rc=$?
  found=("$findings/$t"-*)
  [[ -e "${found[0]}" ]] || found=()
  execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  if ((${#found[@]} == 0 && rc == 0)); then
    echo "fuzz $t: ok, ${execs:-?} inputs in $((SECONDS - start)) s, corpus $(ls "$work" | wc -l) files"
    continue
  fi
  failed+=("$t")
  echo "fuzz $t: ${#found[@]} findings in $((SECONDS - start)) s (exit $rc; log $log)"
  # What each finding is: its first sanitizer line and frame, replayed without libFuzzer.
  for f in "${found[@]:0:10}"; do
    what=$("$build/fuzz/fg_replay_$t" --timeout 12 "$f" 2>&1 |
      grep -m1 -A2 -E 'runtime error|ERROR: |terminate called|^FAIL ' | grep -E 'error|ERROR|#[01] |FAIL|what' |
      sed -E 's/ \(\/[^)]*BuildId[^)]*\)//; s/0x[0-9a-f]+ in //' | head -3 | tr '\n' ' ')
    echo "  $(basename "$f"): $what"
  done
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]} (inputs under $findings)"
  exit 1
fi
echo "fuzz: no findings"
