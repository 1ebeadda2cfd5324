#!/usr/bin/env bash
# Enforces the floors of the house (DESIGN.md): every #include of ours points down.
#   ir         includes nothing of ours but ir/
#   passes     ir/ and passes/
#   frontends  ir/ and frontends/
#   text       ir/, frontends/ (GGUF metadata) and text/  (tokenizers)
#   runtime    ir/ and runtime/  (loading and replaying a plan needs no compiler)
#   codegen    ir/, passes/, runtime/ and codegen/  (never tools/ or frontends/)
#   tools, tests, bench: anything
# Usage: scripts/check-layering.sh [REPO_ROOT]   (exit 1 and one line per violation)
set -euo pipefail

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
ours="ir passes frontends text runtime codegen tools tests bench"

declare -A allowed=(
  [ir]="ir"
  [passes]="ir passes"
  [frontends]="ir frontends"
  [text]="ir frontends text"
  [runtime]="ir runtime"
  [codegen]="ir passes runtime codegen"
)

violations=0
for layer in ir passes frontends text runtime codegen; do
  [[ -d "$root/$layer" ]] || continue
  while IFS= read -r hit; do
    [[ -n "$hit" ]] || continue
    file="${hit%%:*}"
    rest="${hit#*:}"
    line="${rest%%:*}"
    text="${rest#*:}"
    [[ "$text" =~ \"([^\"]*)\" ]] || continue
    target="${BASH_REMATCH[1]}"
    top="${target%%/*}"
    [[ "$target" == */* ]] || continue # a same-folder include without a path
    [[ " $ours " == *" $top "* ]] || continue # not ours (a system or third-party header)
    if [[ " ${allowed[$layer]} " != *" $top "* ]]; then
      echo "${file#"$root"/}:$line: $layer/ may not include \"$target\" (allowed: ${allowed[$layer]})"
      violations=$((violations + 1))
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/$layer" \
             --include='*.h' --include='*.cpp' --include='*.def' --include='*.cuh' \
             --include='*.inc' || true)
done

if ((violations > 0)); then
  echo "check-layering: $violations include(s) point up or sideways" >&2
  exit 1
fi
echo "check-layering: ok"
