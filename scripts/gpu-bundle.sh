#!/usr/bin/env bash
# Packs what a GPU call needs into .gpu (git-ignored), from build/:
#   bash scripts/gpu-bundle.sh [--prev DIR] [--benches] [--python] [--peers] [--models]
# - fusegraph, fusegraph_gpu_tests, fg_bench_kernels, fg_bench_patterns (stripped);
# - --benches: fg_bench_soak and fg_bench_prefill_gemms too (6 MiB: with
#   --prev the bundle and the working tree pass the call's 64 MiB);
# - --prev DIR: DIR/fusegraph as fusegraph-prev (a worktree's build of an
#   earlier commit, for before/after timings in one call);
# - --python: the Python module for the GPU machine's CPython 3.12, built here
#   by scripts/python-module-for.sh, in .gpu/python (FG_PYTHON_MODULE_DIR);
# - --peers: ../shared/peers (ggml-cuda's build and bench scripts) in .gpu/peers;
# - --models: the newest /tmp/fusegraph-models-*/ model GpuQuantModel reads.
# libcupti (dlopen'ed by --trace / --breakdown) goes along always. Then run
# with carry [".gpu"] and start the command with `source .gpu/env.sh`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
prev="" benches=0 python=0 peers=0 models=0
while (($#)); do
  case "$1" in
    --prev) prev="$2"; shift 2 ;;
    --benches) benches=1; shift ;;
    --python) python=1; shift ;;
    --peers) peers=1; shift ;;
    --models) models=1; shift ;;
    *) echo "gpu-bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
rm -rf .gpu-stage && mkdir -p .gpu-stage
bins=(build/fusegraph build/tests/fusegraph_gpu_tests build/bench/fg_bench_kernels
      build/bench/fg_bench_patterns)
((benches)) && bins+=(build/bench/fg_bench_soak build/bench/fg_bench_prefill_gemms)
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu-bundle.sh: $b is not built" >&2; exit 1; }
  strip -o ".gpu-stage/$(basename "$b")" "$b"
done
[ -n "$prev" ] && strip -o .gpu-stage/fusegraph-prev "$prev/fusegraph"
chmod +x .gpu-stage/*
../shared/tools/gpu-bundle .gpu-stage .gpu
cp "${CUDA_HOME:-/usr/local/cuda}"/lib*/libcupti.so.13 .gpu/lib/ 2>/dev/null ||
  cp /usr/local/cuda-13.0/lib/libcupti.so.13 .gpu/lib/
if ((python)); then
  dir=$(bash scripts/python-module-for.sh "${PY312:-$HOME/.pyenv/versions/3.12.1/bin/python3}" build)
  mkdir -p .gpu/python && strip -o .gpu/python/"$(basename "$dir"/fusegraph*.so)" "$dir"/fusegraph*.so
fi
((peers)) && mkdir -p .gpu/peers && cp ../shared/peers/* .gpu/peers/
if ((models)); then
  m=$(ls -td /tmp/fusegraph-models-*/ 2>/dev/null | head -1)
  [ -n "$m" ] && mkdir -p .gpu/models && cp "$m"/qwen3-q8_0.gguf "$m"/prompt.txt .gpu/models/
fi
tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$(( ($(du -sb .gpu | cut -f1) + tree) / 1048576 ))
echo "gpu-bundle.sh: $(du -sm .gpu | cut -f1) MiB in .gpu, $total MiB with the working tree (a call carries 64 MiB at most)"
((total < 64)) || { echo "gpu-bundle.sh: too large for a call: leave out --benches, --python or --peers" >&2; exit 1; }
