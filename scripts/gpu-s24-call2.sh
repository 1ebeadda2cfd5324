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
for w in w-tiny w-dense; do
  for e in 1 0; do
    [ "$(left)" -gt 40 ] || break
    FG_KERNEL_CACHE=/tmp/fgk-st FG_DEBUG_ATTN_STAMPS=1 FG_DEBUG_ATTN_EARLY=$e timeout 60 fusegraph bench --workload $w --compare fused,graph --steps 3 --warmup 2 > /tmp/st.txt 2>&1
    echo "== $w early=$e rc $?: $(grep -E '^graph' /tmp/st.txt | awk '{print $1, $2}')"
    stamps /tmp/st.txt
    grep attn-stamps /tmp/st.txt | tail -16 > "$OUT/stamps-$w-$e.txt"
    grep attn-stamps /tmp/st.txt | tail -16 | head -8
  done
done
echo "done after $((SECONDS - S)) s"
