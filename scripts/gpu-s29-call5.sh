#!/usr/bin/env bash
# Twenty-ninth session, fifth call: gated_gemm on by default, measured.
# 1. fg_bench_prefill_gemms on random operands (now its default), every form.
# 2. W-dense prefill 512 --breakdown with the launch list (why attention is
#    charged 51 µs a launch where Nsight Compute times 24), default and with
#    gated_gemm off.
# 3. Nsight Compute's full set on one flash-prefill launch.
# 4. Prefills with and without gated_gemm, alternating (W-dense 512 / 2048,
#    W-dense q4_K 512).
# 5. The GPU tests the default touches.
#   bash scripts/gpu-s29-call5.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-560}
source scripts/gpu-call-lib.sh
timeout 90 fg_bench_prefill_gemms --tokens 512,2048 > "$OUT/prefill-gemms.txt" 2>&1
echo "prefill gemms rc $? at $((SECONDS - S)) s"; grep -E '^# T|ERROR' "$OUT/prefill-gemms.txt"
for g in "" "--disable-fusion gated_gemm"; do
  timeout 90 fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown --breakdown-launches 64 $g \
    > "$OUT/breakdown${g:+-nogated}.txt" 2>&1
  echo "== breakdown ${g:-default} rc $?"; grep -E "^prefill_|^peak|traced replay|^  [a-z]" "$OUT/breakdown${g:+-nogated}.txt" | head -24
done
timeout 120 ncu --clock-control none -k regex:fg_attention --launch-count 1 --set full \
  fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 > "$OUT/ncu-attention-full.txt" 2>&1
echo "ncu attention rc $? at $((SECONDS - S)) s"
grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Issue Slot|No Eligible|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Waves" "$OUT/ncu-attention-full.txt" | head -30
timeout 60 ncu --clock-control none --cache-control none -k regex:fg_attention --launch-count 4 --metrics gpu__time_duration.sum \
  fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 2>&1 | grep -E "gpu__time_duration" | head -4
PRE=512
for r in 1 2; do
  pre w-dense "" --steps 5 --warmup 2
  pre w-dense "" --steps 5 --warmup 2 --disable-fusion gated_gemm
  pre w-dense-q4_k "" --steps 5 --warmup 2
  pre w-dense-q4_k "" --steps 5 --warmup 2 --disable-fusion gated_gemm
done
PRE=2048 pre w-dense "" --ctx 4096 --steps 3 --warmup 1
PRE=2048 pre w-dense "" --ctx 4096 --steps 3 --warmup 1 --disable-fusion gated_gemm
F='GpuPrefillThenDecode*:GpuDemo*:GpuSession*:*gated_gemm*:*Prefill*'
[ "$(left)" -gt 100 ] && { timeout $(( $(left) - 10 )) $T --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests.txt" 2>&1
  echo "tests rc $? at $((SECONDS - S)) s: $(summ "$OUT/tests.txt")"; }
echo "done after $((SECONDS - S)) s"
