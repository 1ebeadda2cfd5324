#!/usr/bin/env bash
# Twenty-ninth session, fourth call: the GEMM bench on random against constant
# operands, and Nsight Compute's per-launch durations of the plan's prefill
# kernels (one W-dense prefill of 512 tokens, the weight-init kernels and the
# peak GEMM skipped) beside the bench's.
#   bash scripts/gpu-s29-call4.sh  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
S=$SECONDS
for v in "" --constant "" --constant; do
  timeout 60 fg_bench_prefill_gemms --tokens 512 $v --benchmark_filter='T512/(gemmex|merged-gu|merged|batched)/' > /tmp/g.txt 2>&1
  echo "== gemms ${v:-random} rc $?"; grep -E '^# T' /tmp/g.txt
done
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__cycles_elapsed.avg.per_second
K="regex:^(nvjet|fg_[a-hj-z]|sm90|cutlass|void)"
for g in "" "--enable-fusion gated_gemm"; do
  timeout 150 ncu --clock-control none --csv --print-units base --metrics $M -k "$K" --launch-skip 13 --launch-count 120 \
    fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 $g > "$OUT/ncu-prefill${g:+-gated}.csv" 2>&1
  echo "ncu prefill ${g:-default} rc $? at $((SECONDS - S)) s"
done
timeout 100 ncu --clock-control none --csv --print-units base --metrics $M --launch-skip 13 --launch-count 60 \
  fg_bench_prefill_gemms --tokens 512 --benchmark_filter='T512/(gemmex|merged-gu)/' > "$OUT/ncu-gemms.csv" 2>&1
echo "ncu gemms rc $? at $((SECONDS - S)) s"
python3 - "$OUT"/ncu-*.csv <<'PY'
import csv, sys, collections
for f in sys.argv[1:]:
    launches = collections.OrderedDict()
    try:
        lines = [l for l in open(f, errors="replace") if l.startswith('"')]
        for r in csv.DictReader(lines):
            d = launches.setdefault(r["ID"], {"name": r["Kernel Name"][:64]})
            d[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    except Exception as e:
        print(f, "parse error", e); continue
    groups = collections.OrderedDict()
    for d in launches.values():
        k = (d["name"], d.get("launch__grid_size"), d.get("launch__block_size"), d.get("launch__registers_per_thread"))
        groups.setdefault(k, []).append((float(d.get("gpu__time_duration.sum", "nan")), float(d.get("sm__cycles_elapsed.avg.per_second", "nan"))))
    print("==", f, len(launches), "launches")
    for (n, g, b, r), v in groups.items():
        t = [x[0] for x in v]; c = [x[1] for x in v]
        print("%4d x %-64s grid %s block %s regs %s  us mean %.1f min %.1f max %.1f  MHz %.0f" % (len(v), n, g, b, r, sum(t)/len(t)/1e3, min(t)/1e3, max(t)/1e3, sum(c)/len(c)/1e6))
PY
echo "done after $((SECONDS - S)) s"
