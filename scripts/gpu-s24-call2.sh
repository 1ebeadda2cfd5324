#!/usr/bin/env bash
# The twenty-fourth session's second GPU call: where decode attention's time
# goes inside a step. The GpuAttentionEarly case again (its graph built once),
# then a stamped build (FG_DEBUG_ATTN_STAMPS=1: thread 0 of every block of kv
# head 0 prints clock64 deltas of its phases) over one W-tiny and one W-dense
# step with the early loads on and off; the medians per phase.
#   bash scripts/gpu-s24-call2.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
timeout 90 $T --gtest_brief=1 --gtest_filter='GpuAttentionEarly.*' > "$OUT/tests.txt" 2>&1
echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"
med() { # FILE: the median of each phase over the stamped lines
  python3 - "$1" <<'PY'
import re, statistics, sys
keys = "prologue wait pos q loop merge cluster".split()
vals = {k: [] for k in keys}; ns = []
for line in open(sys.argv[1], errors="replace"):
    if "attn-stamps" not in line:
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
for w in w-tiny w-dense; do
  for e in 1 0; do
    [ "$(left)" -gt 40 ] || break
    FG_KERNEL_CACHE=/tmp/fgk-st FG_DEBUG_ATTN_STAMPS=1 FG_DEBUG_ATTN_EARLY=$e timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 3 --warmup 2 > /tmp/st.txt 2>&1
    echo "== $w early=$e rc $?: $(grep -E '^graph' /tmp/st.txt | awk '{print $1, $2}')"
    med /tmp/st.txt
    grep attn-stamps /tmp/st.txt | tail -16 > "$OUT/stamps-$w-$e.txt"
    grep attn-stamps /tmp/st.txt | tail -16 | head -8
  done
done
echo "done after $((SECONDS - S)) s"
