#!/usr/bin/env bash
# Builds the Python module for another CPython of this machine (the GPU
# machine's 3.12, while CI's is 3.11) from a build tree configured with
# -DFG_PYTHON=ON: the module's own translation unit and nanobind are compiled
# again against the other Python's headers, with the commands ninja has for
# them, and linked against the tree's libraries (already position-independent).
#   bash scripts/python-module-for.sh PYTHON [BUILD_DIR=build] [OUT_DIR=BUILD_DIR/python-VER]
# e.g. bash scripts/python-module-for.sh ~/.pyenv/versions/3.12.1/bin/python3
# Prints the folder that holds fusegraph.cpython-VER-*.so; put it on sys.path
# (FG_PYTHON_MODULE_DIR for python/tests).
set -euo pipefail
py="$1"; build="$(cd "${2:-build}" && pwd)"
ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
out="${3:-$build/python-$ver}"
[ -f "$inc/Python.h" ] || { echo "python-module-for: $inc/Python.h is missing" >&2; exit 1; }
cmds=$(ninja -C "$build" -t commands fusegraph_python |
       grep -E 'python/CMakeFiles/(nanobind-static|fusegraph_python)\.dir|python/libnanobind-static\.a|\.so ')
[ -n "$cmds" ] || { echo "python-module-for: $build has no fusegraph_python target (configure with -DFG_PYTHON=ON)" >&2; exit 1; }
oldinc=$(grep -oE -- '-I[^ ]*/include/python3\.[0-9]+' <<<"$cmds" | head -1 | cut -c3-)
rel=${out#"$build"/}
cd "$build"
while IFS= read -r c; do
  c=${c//"$oldinc"/"$inc"}
  c=${c//python\/CMakeFiles/"$rel"/CMakeFiles}
  c=${c//python\/libnanobind-static.a/"$rel"/libnanobind-static.a}
  c=$(sed -E "s# python/fusegraph[^ ]*\.so # $rel/fusegraph$suffix #; s# -Werror##g" <<<"$c")
  for o in $(grep -oE -- "-o [^ ]+" <<<"$c" | cut -c4-); do mkdir -p "$(dirname "$o")"; done
  bash -c "$c"
done <<<"$cmds"
ls "$out"/fusegraph*.so >/dev/null
echo "$out"
