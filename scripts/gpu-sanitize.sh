#!/usr/bin/env bash
# compute-sanitizer over the GPU test suite, one tool and one shard at a time, so that each piece
# fits the GPU machine's 10-minute limit per call (docs/TESTING.md, "compute-sanitizer").
#   bash scripts/gpu-sanitize.sh TOOL [SHARD TOTAL] [TESTS]
# TOOL: memcheck | racecheck | synccheck | initcheck. SHARD/TOTAL use GoogleTest's own sharding
# (GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS: every test lands in exactly one shard). TESTS is the
# test binary (default: fusegraph_gpu_tests on PATH). Prints the sanitizer's summary line and the
# gtest result (every test with its time: a slow one shows); exits non-zero on any finding or
# failed test. GTEST_EXTRA replaces the default GoogleTest flags, which leave out
# GpuInputCheck.DeviceFaultIsSticky: it faults the device on purpose and hangs under synccheck.
# FG_UNDER_SANITIZER is set for the tests: the CUPTI trace test skips (CUPTI takes no second
# subscriber beside the sanitizer).
set -uo pipefail
tool=${1:?tool}
shard=${2:-0}
total=${3:-1}
tests=${4:-fusegraph_gpu_tests}
extra=()
case "$tool" in
  memcheck) extra=(--leak-check full) ;;
  racecheck) extra=(--racecheck-report all) ;;
  synccheck|initcheck) ;;
  *) echo "unknown tool $tool" >&2; exit 2 ;;
esac
FG_UNDER_SANITIZER=$tool GTEST_SHARD_INDEX=$shard GTEST_TOTAL_SHARDS=$total \
  compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 86 --print-limit 20 \
  "$(command -v "$tests")" ${GTEST_EXTRA:---gtest_filter=-GpuInputCheck.DeviceFaultIsSticky}
rc=$?
echo "gpu-sanitize: $tool shard $shard/$total exit $rc"
exit $rc
