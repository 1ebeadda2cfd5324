#!/usr/bin/env python3
"""Draws a Chrome trace written by `fusegraph run|bench --trace` as a timeline.

    python3 scripts/trace-picture.py step.json step.html [--title T]

The page is self-contained (inline SVG, no scripts from elsewhere): one row per
track of the trace ("kernels", then "overlapping N" where PDL or parallel graph
branches let kernels run at once), one box per kernel coloured by its op, the
fused ones outlined, a time axis in microseconds, and a table of the time per
op (summed kernel time, share of the step, bytes, GB/s). Hovering a box shows
its kernel, node, bytes and microseconds. Render it to a PNG with a headless
browser, as the README does:

    chromium --headless --disable-gpu --no-sandbox --window-size=1400,700 \
      --screenshot=step.png step.html

Only the standard library; exits 2 with one line on a malformed trace.
"""
import argparse
import html
import json
import sys

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
           "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295"]


def fail(msg):
    print(f"trace-picture: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        fail(f"{path}: no traceEvents list")
    title, tracks, boxes = path, {}, []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            fail(f"{path}: event {i} is not an object")
        if e.get("ph") == "M":
            name = (e.get("args") or {}).get("name", "")
            if e.get("name") == "process_name":
                title = name
            elif e.get("name") == "thread_name":
                tracks[e.get("tid")] = name
        elif e.get("ph") == "X":
            try:
                ts, dur = float(e["ts"]), float(e["dur"])
            except (KeyError, TypeError, ValueError):
                fail(f"{path}: event {i} lacks a numeric ts/dur")
            boxes.append((e.get("tid", 1), ts, dur, e.get("name", "?"),
                          e.get("cat", "?"), e.get("args") or {}))
    if not boxes:
        fail(f"{path}: the trace holds no kernel events")
    return title, tracks, boxes


def draw(title, tracks, boxes, heading):
    t0 = min(b[1] for b in boxes)
    t1 = max(b[1] + b[2] for b in boxes)
    span = max(t1 - t0, 1e-3)
    tids = sorted({b[0] for b in boxes})
    ops = {}
    for tid, ts, dur, name, cat, args in boxes:
        o = ops.setdefault(cat, [0.0, 0, 0.0, False])
        o[0] += dur
        o[1] += 1
        o[2] += float(args.get("bytes") or 0)
        o[3] = o[3] or bool(args.get("fused_group"))
    order = sorted(ops, key=lambda c: -ops[c][0])
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(order)}

    left, width, row, top = 130, 1200, 34, 40
    height = top + row * len(tids) + 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" '
           f'height="{height}" font-family="sans-serif" font-size="11">']
    step = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
    tick = next((s for s in step if span / s <= 12), step[-1])
    t = 0.0
    while t <= span + 1e-9:
        x = left + t / span * width
        svg.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 30}" '
                   'stroke="#ddd"/>')
        svg.append(f'<text x="{x:.1f}" y="{top - 10}" text-anchor="middle" fill="#555">'
                   f'{t:g} µs</text>')
        t += tick
    for r, tid in enumerate(tids):
        y = top + r * row
        label = html.escape(tracks.get(tid, f"track {tid}"))
        svg.append(f'<text x="{left - 8}" y="{y + row / 2 + 4:.1f}" text-anchor="end">'
                   f'{label}</text>')
        for btid, ts, dur, name, cat, args in boxes:
            if btid != tid:
                continue
            x = left + (ts - t0) / span * width
            w = max(dur / span * width, 0.8)
            fused = bool(args.get("fused_group"))
            tip = html.escape(f"{name}\nop {cat}  node {args.get('node', '-')}\n"
                              f"{dur:.2f} µs  {float(args.get('bytes') or 0) / 1e6:.2f} MB  "
                              f"{float(args.get('GB/s') or 0):.0f} GB/s")
            stroke = ' stroke="#000" stroke-width="1.2"' if fused else ""
            svg.append(f'<rect x="{x:.2f}" y="{y + 4}" width="{w:.2f}" height="{row - 8}" '
                       f'fill="{colour[cat]}"{stroke}><title>{tip}</title></rect>')
            if w > 7 * len(cat):
                svg.append(f'<text x="{x + 3:.2f}" y="{y + row / 2 + 4:.1f}" fill="#fff" '
                           f'pointer-events="none">{html.escape(cat)}</text>')
    svg.append(f'<text x="{left}" y="{height - 10}" fill="#555">{len(boxes)} kernels, '
               f'{span:.1f} µs from the first start to the last end; outlined: fused</text>')
    svg.append("</svg>")

    busy = sum(b[2] for b in boxes)
    rows = []
    for c in order:
        dur, n, byts, fused = ops[c]
        gbs = byts / dur / 1e3 if dur > 0 else 0
        rows.append(f'<tr><td><span class="sw" style="background:{colour[c]}"></span>'
                    f'{html.escape(c)}{" (fused)" if fused else ""}</td><td>{n}</td>'
                    f'<td>{dur:.1f}</td><td>{100 * dur / busy:.1f} %</td>'
                    f'<td>{byts / 1e6:.2f}</td><td>{gbs:.0f}</td></tr>')
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(heading or title)}</title><style>"
        "body{font-family:sans-serif;margin:16px;color:#222}"
        "table{border-collapse:collapse;font-size:12px;margin-top:8px}"
        "td,th{padding:2px 10px;text-align:right}td:first-child,th:first-child{text-align:left}"
        "tr:nth-child(even){background:#f4f4f4}"
        ".sw{display:inline-block;width:10px;height:10px;margin-right:6px}</style></head><body>"
        f"<h3 style='margin:0 0 8px 0'>{html.escape(heading or title)}</h3>"
        + "\n".join(svg) +
        "<table><tr><th>op</th><th>kernels</th><th>µs (summed)</th><th>share</th>"
        "<th>MB</th><th>GB/s</th></tr>" + "".join(rows) + "</table></body></html>\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    title, tracks, boxes = load(a.trace)
    page = draw(title, tracks, boxes, a.title)
    try:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:
        fail(f"{a.out}: {e}")


if __name__ == "__main__":
    main()
