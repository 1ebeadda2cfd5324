#!/usr/bin/env bash
# Fresh Debian 12 machine -> ./build/fusegraph and every test binary.
#   bash scripts/build.sh            (BUILD_DIR=build, JOBS=number of cores)
# RelWithDebInfo with asserts live (FG_ASSERTS=ON, the default); FG_ASSERTS=OFF
# gives the plain -DNDEBUG flags (for benchmarks). FG_PYTHON=ON (the default)
# also builds the Python module (python/) for python3, whose tests ctest runs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
cuda="${CUDA_HOME:-/usr/local/cuda}"

bash "$root/scripts/setup-deps.sh"
cd "$root"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFG_ASSERTS="${FG_ASSERTS:-ON}" -DCUDAToolkit_ROOT="$cuda" \
  -DFG_PYTHON="${FG_PYTHON:-ON}" -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
cmake --build "$build" -j "$jobs"
