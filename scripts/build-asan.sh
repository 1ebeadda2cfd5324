#!/usr/bin/env bash
# The sanitizer build: clang-14 with AddressSanitizer + UndefinedBehaviorSanitizer
# (-fno-sanitize-recover=undefined: the first UB report fails the test) and the
# libFuzzer targets fg_fuzz_* (FG_FUZZ=ON), in build-asan/.
#   bash scripts/build-asan.sh       (BUILD_DIR=build-asan, JOBS=number of cores)
#   ctest --test-dir build-asan -j2  (scripts/asan-env.sh sets the sanitizer options)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-build-asan}"
jobs="${JOBS:-$(nproc)}"
cuda="${CUDA_HOME:-/usr/local/cuda}"

bash "$root/scripts/setup-deps.sh"
cd "$root"
# -O1 with line tables: the usual sanitizer level (readable stacks, quicker to build than -O2 -g).
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DFG_ASSERTS=ON -DFG_SANITIZE=address,undefined -DFG_FUZZ=ON \
  -DCUDAToolkit_ROOT="$cuda" >/dev/null
cmake --build "$build" -j "$jobs"
