#!/usr/bin/env bash
# Twenty-ninth session, third call: why the plan's prefill GEMMs take 349 µs a
# layer where fg_bench_prefill_gemms' same calls take 305, and why the flash
# prefill's launches look twice as long in the breakdown (1.59 ms / 32) as
# under Nsight Compute (23.8 µs in the ninth session).
# 1. W-dense prefill 512 with --breakdown (the traced span's busy / idle),
#    default and with gated_gemm.
# 2. ncu, names + durations of every kernel of that prefill (one step) and of
#    the bench's gemmex form at T = 512.
#   bash scripts/gpu-s29-call3.sh DEADLINE_S  (carry [".gpu"])
set -uo pipefail
source .gpu/env.sh
D=${1:-500}
source scripts/gpu-call-lib.sh
for g in "" "--enable-fusion gated_gemm"; do
  timeout 90 fusegraph bench --workload w-dense --prefill 512 --steps 5 --warmup 2 --breakdown $g \
    > /tmp/b.txt 2>&1
  echo "== breakdown ${g:-default} rc $?"; cat /tmp/b.txt | grep -v "^fusegraph: compiling"
  cp /tmp/b.txt "$OUT/breakdown-${g:+gated}.txt"
done
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
timeout 200 ncu --clock-control none --csv --print-units base --metrics $M --launch-count 260 \
  fusegraph bench --workload w-dense --prefill 512 --steps 1 --warmup 0 > "$OUT/ncu-prefill.csv" 2>&1
echo "ncu prefill rc $? at $((SECONDS - S)) s, $(wc -l < "$OUT/ncu-prefill.csv") lines"
timeout 100 ncu --clock-control none --csv --print-units base --metrics $M --launch-count 60 \
  fg_bench_prefill_gemms --tokens 512 --benchmark_filter='T512/(gemmex|merged-gu)/' > "$OUT/ncu-gemms.csv" 2>&1
echo "ncu gemms rc $? at $((SECONDS - S)) s, $(wc -l < "$OUT/ncu-gemms.csv") lines"
python3 - "$OUT/ncu-prefill.csv" "$OUT/ncu-gemms.csv" <<'PY'
import csv, sys, collections
for f in sys.argv[1:]:
    launches = collections.OrderedDict()
    try:
        lines = [l for l in open(f, errors="replace") if l.startswith('"')]
        for r in csv.DictReader(lines):
            d = launches.setdefault(r["ID"], {"name": r["Kernel Name"][:80]})
            d[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    except Exception as e:
        print(f, "parse error", e); continue
    groups = collections.OrderedDict()
    for d in launches.values():
        k = (d["name"], d.get("launch__grid_size"), d.get("launch__block_size"), d.get("launch__registers_per_thread"))
        groups.setdefault(k, []).append(float(d.get("gpu__time_duration.sum", "nan")))
    print("==", f, len(launches), "launches")
    for (n, g, b, r), v in groups.items():
        print("%4d x %-80s grid %s block %s regs %s  us mean %.1f min %.1f max %.1f" % (len(v), n, g, b, r, sum(v)/len(v)/1e3, min(v)/1e3, max(v)/1e3))
PY
echo "done after $((SECONDS - S)) s"
