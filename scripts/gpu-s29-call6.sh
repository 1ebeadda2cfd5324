#!/usr/bin/env bash
# Twenty-ninth session, sixth call: the flash prefill's launch is 53-55 µs in
# a traced replay of W-dense's 512-token prefill but 23-24 µs under Nsight
# Compute (fifth call). The replay's launch list under variants of the
# kernel and of programmatic launch, and Nsight Systems if the machine has it.
#   bash scripts/gpu-s29-call6.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
v() {
  local envs="$1"; shift
  [ "$(left)" -gt 40 ] || { echo "skipped $envs"; return; }
  env $envs timeout 60 fusegraph bench --workload w-dense --prefill 512 --steps 3 --warmup 2 --breakdown --breakdown-launches 40 "$@" > /tmp/v.txt 2>&1
  { echo "== ${envs:-default} $* (rc $?)"; cat /tmp/v.txt; } >> "$OUT/variants.txt"
  echo "== ${envs:-default} $*: $(grep -E '^prefill_' /tmp/v.txt | awk '{print $3}') ms; attention $(grep -E '^  attention ' /tmp/v.txt | awk '{print $3}') ms; spans: $(grep -E 'attn = attention' /tmp/v.txt | awk '{print $4}' | tr '\n' ' ')"
}
v ""
v "FG_DEBUG_PDL_NO_TRIGGER=1 FG_KERNEL_CACHE=/tmp/fgk-nt"
v "FG_DEBUG_FLASH_STAGES=1"
v "FG_DEBUG_FLASH_MIN_BLOCKS=2"
v "" --compare nopdl
v ""
if command -v nsys > /dev/null; then
  timeout 90 nsys profile --cuda-graph-trace=node -o /tmp/p --force-overwrite true \
    fusegraph bench --workload w-dense --prefill 512 --steps 3 --warmup 1 > /tmp/nsys.txt 2>&1
  echo "nsys rc $?"
  timeout 60 nsys stats --report cuda_gpu_kern_sum --format csv /tmp/p.nsys-rep 2>/dev/null | head -30 > "$OUT/nsys.txt"
  grep -iE "attention|nvjet" "$OUT/nsys.txt" | head
else
  echo "no nsys"
fi
echo "done after $((SECONDS - S)) s"
