#!/usr/bin/env bash
# Issue 11, item 6: does the GEMV's variant rule hold on shapes nobody tuned for?
# Runs the kernel benchmark's `unseen` cases (3584->18944, 5120->13824, 18944->3584; T = 1, 2, 4, 8)
# once with the rule's choice and once per forced variant (EmitOptions::gemv* through
# fg_bench_kernels --gemv-*), then prints, per case, the rule's time, the best variant's and
# their ratio.
#   bash bench/variant-sweep.sh OUTDIR [FILTER]     (FILTER: a --benchmark_filter regex, default unseen)
set -uo pipefail
out=${1:?outdir}
filter=${2:-unseen}
mkdir -p "$out"
variants=("rule:" "rows2:--gemv-rows 2" "rows4:--gemv-rows 4" "rows8:--gemv-rows 8"
          "warps4:--gemv-warps 4" "warps8:--gemv-warps 8" "unroll1:--gemv-unroll 1"
          "unroll4:--gemv-unroll 4" "no-tc:--gemv-tc-min 9" "tc-all:--gemv-tc-min 1")
for v in "${variants[@]}"; do
  name=${v%%:*}
  # shellcheck disable=SC2086
  fg_bench_kernels --benchmark_filter="$filter" --no-cublas --json "$out/sweep-$name.json" ${v#*:} \
    > "$out/sweep-$name.log" 2>&1 || echo "variant $name failed (see $out/sweep-$name.log)"
done
python3 - "$out" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
res = {}
for f in sorted(glob.glob(os.path.join(out, "sweep-*.json"))):
    v = os.path.basename(f)[6:-5]
    try:
        data = json.load(open(f))
    except Exception as e:
        print(f"{v}: unreadable ({e})"); continue
    for b in data.get("benchmarks", []):
        if "us" in b and not b.get("error_occurred"):
            res.setdefault(b["name"].split("/iterations")[0], {})[v] = b["us"]
names = sorted({v for vs in res.values() for v in vs} - {"rule"})
print(f"{'case':48} {'rule us':>8} {'best us':>8} {'best':>8} {'rule/best':>9}  " +
      " ".join(f"{n:>7}" for n in names))
worst = 1.0
for case, vs in sorted(res.items()):
    if "rule" not in vs: continue
    best = min(vs, key=vs.get)
    r = vs["rule"] / vs[best]
    worst = max(worst, r)
    print(f"{case:48} {vs['rule']:8.2f} {vs[best]:8.2f} {best:>8} {r:9.3f}  " +
          " ".join(f"{vs[n]:7.2f}" if n in vs else "      -" for n in names))
print(f"worst rule/best: {worst:.3f} (target <= 1.05)")
PY
