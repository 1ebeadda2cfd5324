#!/usr/bin/env bash
# For the session after the thirtieth: `bench --prefill N --kv S` (written
# after the last call) beside the first chunk — W-dense 512 tokens at 0, 512,
# 1024 and 1536 (what the old step loop mixed), 2048 at 0 and 2048 (--ctx
# 4096) — then the usual prefill tests as a check of the tree.
#   bash scripts/gpu-s30-next.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-300}
source scripts/gpu-call-lib.sh
for s in 0 512 1024 1536; do
  pre w-dense "" --steps 5 --warmup 2 --breakdown --kv $s
  grep -E "^bench|^  fused.attention_convert" /tmp/pre.txt | tr -s ' ' | tr '\n' ';'; echo
done
for s in 0 2048; do
  PRE=2048 pre w-dense "" --steps 3 --warmup 1 --ctx 4096 --kv $s
done
timeout 150 fusegraph_gpu_tests --gtest_filter='GpuPrefillThenDecode*:GpuDemo*:*GpuFused*attention_convert*:*GpuFused*gated*' > "$OUT/gtest.txt" 2>&1
echo "== tests (rc $?): $(summ "$OUT/gtest.txt")"
echo "done after $((SECONDS - S)) s"
