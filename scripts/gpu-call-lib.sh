# Helpers of the GPU call scripts (scripts/gpu-sN-callM.sh from the fifteenth
# session on): source it after `source .gpu/env.sh` with the deadline in D.
#   left                seconds left before the deadline
#   summ FILE           a gtest / compute-sanitizer log in one line
#   kern LABEL FLAGS... fg_bench_kernels' table rows (needs 200 s left)
#   akern LABEL FLAGS... the same for decode attention's rows
#   aenv "ENV=V ..." FILTER
#                       decode attention with --pdl under ENV, its rows on one
#                       line (workload, shape, T, µs, % BW)
#   step WORKLOAD [ENV=V ...]
#                       a decode step, graph-fused wall ms (needs 45 s left;
#                       every whole output in $OUT/steps-full.txt: the device
#                       tool brings back only a few files)
#   stamps FILE         decode attention's phase stamps (FG_DEBUG_ATTN_STAMPS=1)
#                       in FILE: the median of each phase over its blocks
#   pats TIMEOUT [FLAGS...]
#                       fg_bench_patterns into $OUT/patterns.{json,txt}, one
#                       line a fused case: speedup, GPU µs, or why it skipped
#   prevstep WORKLOAD   the same step with fusegraph-prev (gpu-bundle.sh --prev)
#   stepf WORKLOAD "ENV=V ..." [BENCH FLAGS...]
#                       the same with bench flags, and the plan's launches
#                       (STEP_TIMEOUT=S for workloads whose set-up needs more
#                       than 75 s on a cold machine: W-moe-48 q4_K)
S=$SECONDS
D=${D:-560}
export FG_KERNEL_CACHE=${FG_KERNEL_CACHE:-/tmp/fgk0}
# The model GpuQuantModel reads (gpu-bundle.sh --models): the GPU machine
# lacks the `gguf` package that writes it (without, the test skips).
[ -d .gpu/models ] && export FG_MODEL_DIR="$PWD/.gpu/models"
T=$(command -v fusegraph_gpu_tests)
left() { echo $((D - (SECONDS - S))); }
summ() { grep -E '^\[  (PASSED|FAILED)|FAILED  \]|ERROR SUMMARY|Failure|actual' "$1" | head -14 | tr '\n' ' '; }
kern() {
  local l="$1"; shift
  [ "$(left)" -gt ${KERN_MIN_LEFT:-200} ] || { echo "skipped kernels $l"; return; }
  echo "== kernels $l"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas "$@" --table /tmp/k.md > /tmp/k.txt 2>&1; echo "rc $?"
  grep -E "^\| (matmul|fused)" /tmp/k.md | cut -d'|' -f2,3,4,6,8,11
}
akern() {
  local l="$1"; shift
  echo "== attention $l"
  timeout 60 fg_bench_kernels --reps 5 --no-cublas "$@" --table /tmp/a.md > /tmp/a.txt 2>&1; echo "rc $?"
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f2,3,4,6,8,11
}
aenv() {
  echo "== attention ${1:-default}"
  env $1 timeout 60 fg_bench_kernels --reps 5 --no-cublas --pdl --table /tmp/a.md \
    --benchmark_filter="$2" > /tmp/a.txt 2>&1
  grep -E "^\| attention" /tmp/a.md | cut -d'|' -f3,4,7,8,11 | tr '\n' ';'; echo
}
step_n=0
step() {
  local w="$1"; shift
  [ "$(left)" -gt 45 ] || { echo "skipped: $w $*"; return; }
  step_n=$((step_n + 1))
  env "$@" timeout 75 fusegraph bench --workload "$w" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== step $step_n: $w ${*:-default} (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $w ${*:-default} (rc $rc): $(grep -E '^graph' /tmp/step.txt | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ')"
}
prevstep() {
  [ "$(left)" -gt 40 ] || { echo "skipped: prev $1"; return; }
  timeout 60 fusegraph-prev bench --workload "$1" --compare fused,graph --steps 30 > /tmp/step.txt 2>&1
  echo "== $1 prev (rc $?): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/step.txt | tail -1)"
}
stepf() {
  local w="$1" envs="$2"; shift 2
  [ "$(left)" -gt 45 ] || { echo "skipped: $w $envs $*"; return; }
  env $envs timeout "${STEP_TIMEOUT:-75}" fusegraph bench --workload "$w" --compare fused,graph --steps 30 "$@" > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== $w $envs $* (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $w ${envs:-} $* (rc $rc): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/step.txt | tail -1)"
}
pats() {
  local t="$1"; shift
  timeout "$t" fg_bench_patterns --benchmark_out="$OUT/patterns.json" --benchmark_out_format=json "$@" > "$OUT/patterns.txt" 2>&1
  echo "== patterns (rc $?)"
  python3 - "$OUT/patterns.json" <<'PY'
import json, sys
try:
    bs = json.load(open(sys.argv[1]))["benchmarks"]
except Exception as e:
    print("no json:", e); sys.exit()
for b in bs:
    if "/fused" in b["name"]:
        print(b["name"].split("/iterations")[0], "x%.2f" % b.get("speedup", 0),
              "%.1f us" % (b.get("gpu_ms_median", 0) * 1e3), b.get("error_message", ""))
PY
}
stamps() {
  python3 - "$1" <<'PY'
import re, statistics, sys
keys = "prologue wait pos q loop merge cluster".split()
vals = {k: [] for k in keys}; ns = []
for line in open(sys.argv[1], errors="replace"):
    # (blocks past the live rows, which only join the barrier, print "q 20")
    if "attn-stamps" not in line or " q 20 " in line:
        continue
    m = re.search(r"\+(\d+) ns", line)
    if m:
        ns.append(int(m.group(1)))
    for k in keys:
        m = re.search(r"\b%s (-?\d+)" % k, line)
        if m:
            vals[k].append(int(m.group(1)))
print("%d lines;" % len(ns), " ".join("%s %d" % (k, statistics.median(v)) for k, v in vals.items() if v),
      "| entry->barrier ns median %d" % statistics.median(ns) if ns else "")
PY
}
# pre WORKLOAD "ENV=V ..." BENCH FLAGS...: a prefill of PRE (512) tokens, the
# wall and GPU ms on one line; every whole output in $OUT/prefill-full.txt.
pre() {
  local w="$1" envs="$2"; shift 2
  [ "$(left)" -gt ${PRE_MIN_LEFT:-90} ] || { echo "skipped prefill $w $envs $*"; return; }
  env $envs timeout ${PRE_TIMEOUT:-90} fusegraph bench --workload "$w" --prefill "${PRE:-512}" "$@" > /tmp/pre.txt 2>&1
  local rc=$?
  { echo "== $w $envs $* (rc $rc)"; cat /tmp/pre.txt; } >> "$OUT/prefill-full.txt"
  echo "== prefill $w ${envs:-default} $* (rc $rc): $(grep -E '^prefill_' /tmp/pre.txt | awk '{print $3, $4}')"
}
