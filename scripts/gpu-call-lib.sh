# Helpers of the GPU call scripts (scripts/gpu-sN-callM.sh from the fifteenth
# session on): source it after `source .gpu/env.sh` with the deadline in D.
#   left                seconds left before the deadline
#   summ FILE           a gtest / compute-sanitizer log in one line
#   kern LABEL FLAGS... fg_bench_kernels' table rows (needs 200 s left)
#   akern LABEL FLAGS... the same for decode attention's rows
#   step WORKLOAD [ENV=V ...]
#                       a decode step, graph-fused wall ms (needs 45 s left;
#                       every whole output in $OUT/steps-full.txt: the device
#                       tool brings back only a few files)
#   stepf WORKLOAD "ENV=V ..." [BENCH FLAGS...]
#                       the same with bench flags, and the plan's launches
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
stepf() {
  local w="$1" envs="$2"; shift 2
  [ "$(left)" -gt 45 ] || { echo "skipped: $w $envs $*"; return; }
  env $envs timeout 75 fusegraph bench --workload "$w" --compare fused,graph --steps 30 "$@" > /tmp/step.txt 2>&1
  local rc=$?
  { echo "== $w $envs $* (rc $rc)"; cat /tmp/step.txt; } >> "$OUT/steps-full.txt"
  echo "== $w ${envs:-} $* (rc $rc): $(grep -E '^graph' /tmp/step.txt | awk '{print $1, $2}') $(grep -o '[0-9]* launches' /tmp/step.txt | tail -1)"
}
