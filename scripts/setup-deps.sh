#!/usr/bin/env bash
# Installs the Debian 12 packages fusegraph builds with, only those missing.
# The CUDA toolkit (nvcc, cudart, NVRTC, cuBLAS headers and libraries) is not a
# Debian package here: it is expected at /usr/local/cuda (override with CUDA_HOME).
set -euo pipefail

packages=(cmake ninja-build g++ llvm-14-dev llvm-14-tools libgtest-dev libbenchmark-dev
          nlohmann-json3-dev python3)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  echo "setup-deps: installing ${missing[*]}"
  sudo=""
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null || { echo "setup-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -x "$cuda/bin/nvcc" || ! -f "$cuda/include/nvrtc.h" ]]; then
  echo "setup-deps: no CUDA toolkit at $cuda (need bin/nvcc and include/nvrtc.h);" \
       "install it there or set CUDA_HOME" >&2
  exit 1
fi
