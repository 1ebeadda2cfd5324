#!/usr/bin/env bash
# Installs the Debian 12 packages fusegraph builds with, only those missing.
# The CUDA toolkit (nvcc, cudart, NVRTC, cuBLAS headers and libraries) is not a
# Debian package here: it is expected at /usr/local/cuda (override with CUDA_HOME).
set -euo pipefail

# clang-14 and libclang-rt-14-dev (the ASan/UBSan runtimes and libFuzzer) are for
# the sanitizer build and the fuzzers (scripts/build-asan.sh, scripts/fuzz.sh).
# chromium and graphviz check `inspect --graph` pictures (tests/ir/cli/graph-picture.fg:
# the HTML in a headless browser, the DOT through `dot`).
packages=(cmake ninja-build g++ llvm-14-dev llvm-14-tools libgtest-dev libbenchmark-dev
          nlohmann-json3-dev python3 clang-14 libclang-rt-14-dev chromium graphviz)
# text/ (tokenizers): PCRE2 for the split regexes, ICU for NFC, found with pkg-config.
packages+=(pkg-config libpcre2-dev libicu-dev)

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

# Python packages the model-frontend tests write their model files with
# (tests/models/gen_models.py; the tests skip with a message without them), and
# jinja2 for the chat-template check (tests/models/gen_chat_fixtures.py).
if ! python3 -c "import gguf, numpy, safetensors, jinja2" >/dev/null 2>&1; then
  echo "setup-deps: pip-installing gguf numpy safetensors jinja2"
  python3 -m pip install --quiet gguf numpy safetensors jinja2 ||
    python3 -m pip install --quiet --break-system-packages gguf numpy safetensors jinja2 ||
    echo "setup-deps: could not install gguf numpy safetensors jinja2; model-file tests will skip" >&2
fi

# The tokenizer tests regenerate their expected ids with Hugging Face `tokenizers`
# (tests/text/gen_tokenizers.py --check; the committed fixtures need no Python).
if ! python3 -c "import tokenizers" >/dev/null 2>&1; then
  echo "setup-deps: pip-installing tokenizers"
  python3 -m pip install --quiet tokenizers ||
    python3 -m pip install --quiet --break-system-packages tokenizers ||
    echo "setup-deps: could not install tokenizers; the regeneration test will skip" >&2
fi

# The Python module (python/, built by scripts/build.sh with FG_PYTHON=ON) and its
# pytest suite (ctest's python.pytest): nanobind builds it, pytest runs the tests.
if ! python3 -c "import nanobind, pytest, numpy" >/dev/null 2>&1; then
  echo "setup-deps: pip-installing nanobind pytest numpy"
  python3 -m pip install --quiet nanobind pytest numpy ||
    python3 -m pip install --quiet --break-system-packages nanobind pytest numpy ||
    { echo "setup-deps: could not install nanobind pytest numpy (the Python module)" >&2; exit 1; }
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -x "$cuda/bin/nvcc" || ! -f "$cuda/include/nvrtc.h" ]]; then
  echo "setup-deps: no CUDA toolkit at $cuda (need bin/nvcc and include/nvrtc.h);" \
       "install it there or set CUDA_HOME" >&2
  exit 1
fi
