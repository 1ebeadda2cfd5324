#!/usr/bin/env bash
# Builds the Python module on the GPU machine (its Python, 3.12 there, not CI's
# 3.11) and runs the tests that need a device: DLPack into torch without a copy
# and CUDA logits against the CPU reference (python/tests/test_dlpack_cuda.py),
# then the whole pytest suite on that Python.
#   bash scripts/gpu-python.sh              (BUILD_DIR=build-gpu-python, PYTHON=python3)
# or, with a module built elsewhere for this Python (scripts/python-module-for.sh,
# carried in the bundle) and the CLI on PATH, nothing is built:
#   FG_PYTHON_MODULE_DIR=.gpu/python bash scripts/gpu-python.sh
# Needs, on that machine: the C++ toolchain of scripts/setup-deps.sh (cmake,
# ninja, g++, llvm-14-dev, nlohmann-json3-dev, the CUDA toolkit) and, for
# $PYTHON, nanobind, numpy, pytest and torch with CUDA. Nothing is downloaded.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-build-gpu-python}"
python="${PYTHON:-python3}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
cd "$root"

missing=()
for m in nanobind numpy pytest torch; do
  "$python" -c "import $m" >/dev/null 2>&1 || missing+=("$m")
done
if ((${#missing[@]} > 0)); then
  echo "gpu-python: $python lacks ${missing[*]} (pip install ${missing[*]})" >&2
  exit 1
fi
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" ||
  { echo "gpu-python: torch sees no CUDA device" >&2; exit 1; }

if [ -n "${FG_PYTHON_MODULE_DIR:-}" ]; then
  FG_PYTHON_MODULE_DIR="$(cd "$FG_PYTHON_MODULE_DIR" && pwd)"
  export FG_PYTHON_MODULE_DIR FG_CLI="${FG_CLI:-$(command -v fusegraph)}"
  echo "gpu-python: $("$python" --version), the module in $FG_PYTHON_MODULE_DIR"
else
  echo "gpu-python: $("$python" --version), building $build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFG_PYTHON=ON \
    -DPython_EXECUTABLE="$(command -v "$python")" -DCUDAToolkit_ROOT="$cuda" >/dev/null
  cmake --build "$build" --target fusegraph fusegraph_python -j "${JOBS:-$(nproc)}"
  export FG_PYTHON_MODULE_DIR="$root/$build/python" FG_CLI="$root/$build/fusegraph"
fi
export FG_SOURCE_DIR="$root"
# The device tests must run, not skip: -rs lists skips, and a skip fails here.
"$python" -m pytest -q -rs -p no:cacheprovider python/tests/test_dlpack_cuda.py | tee /tmp/gpu-python.log
if grep -q "skipped" /tmp/gpu-python.log; then
  echo "gpu-python: the CUDA tests skipped" >&2
  exit 1
fi
"$python" -m pytest -q -p no:cacheprovider python/tests
