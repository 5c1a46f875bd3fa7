#!/usr/bin/env python3
"""Turns a bench/soak run directory into soak.svg and summary.txt.

    bench/soak-report.py OUT SOAK_SECONDS LOAD_EXIT PEAK RATE PERCENT

Reads OUT/samples.csv (written by bench/soak) and OUT/load.json (the steady load's bench
result). The SVG has one small panel per sampled series against elapsed time; it is written by
hand (a few polylines) so that the soak needs nothing beyond Python's standard library.

Verdicts, as docs/operations.md states them:
- memory: the median RSS over the last minute within 10 % of the median RSS over the minute
  around minute 2 (for a run shorter than 10 minutes: windows of a tenth of the run, around 20 %
  of it, so the warm-up is behind it);
- loss: the steady load, under the lossless `block` policy, lost, duplicated and reordered
  nothing, and the bench exited 0.
"""
import csv
import json
import os
import statistics
import sys

SERIES = [
    ("rss_kib", "RSS (MiB)", 1 / 1024),
    ("fds", "open fds", 1),
    ("threads", "threads", 1),
    ("tasks", "tokio tasks", 1),
    ("topics", "topics", 1),
    ("subscriptions", "subscriptions", 1),
    ("connections", "connections", 1),
    ("retained_bytes", "retained (MiB)", 1 / (1024 * 1024)),
]


def panel(x0, y0, w, h, title, xs, ys):
    """One panel: frame, title, min/max labels and the polyline."""
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
           f'<text x="{x0 + 4}" y="{y0 - 4}" font-size="12">{title}</text>']
    if not xs:
        return out
    lo, hi = min(ys), max(ys)
    span = (hi - lo) or max(abs(hi), 1.0)
    xmax = max(xs) or 1
    pts = " ".join(f"{x0 + w * x / xmax:.1f},{y0 + h - h * (y - lo) / span:.1f}" for x, y in zip(xs, ys))
    out.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{pts}"/>')
    out.append(f'<text x="{x0 + w + 4}" y="{y0 + 10}" font-size="10">{hi:.1f}</text>')
    out.append(f'<text x="{x0 + w + 4}" y="{y0 + h}" font-size="10">{lo:.1f}</text>')
    out.append(f'<text x="{x0 + w - 30}" y="{y0 + h + 12}" font-size="10">{xmax} s</text>')
    return out


def main():
    out_dir, soak_s, load_rc, peak, rate, percent = sys.argv[1:7]
    soak_s, load_rc = int(soak_s), int(load_rc)
    with open(os.path.join(out_dir, "samples.csv")) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    for r in rows:
        r.setdefault("tasks", 0.0)
    xs = [int(r["elapsed_s"]) for r in rows]

    w, h, gap = 520, 90, 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + 120}" '
           f'height="{len(SERIES) * (h + gap) + 40}" font-family="sans-serif">',
           f'<text x="10" y="18" font-size="14">bench/soak: {percent} % of peak ({rate} of {peak} msgs/s)</text>']
    for i, (key, title, scale) in enumerate(SERIES):
        svg += panel(40, 50 + i * (h + gap), w, h, title, xs, [r[key] * scale for r in rows])
    svg.append("</svg>")
    with open(os.path.join(out_dir, "soak.svg"), "w") as f:
        f.write("\n".join(svg) + "\n")

    mark = 120 if soak_s >= 600 else soak_s // 5
    window = 60 if soak_s >= 600 else max(soak_s // 10, 10)
    around = [r["rss_kib"] for r in rows if abs(r["elapsed_s"] - mark) <= window / 2]
    end = rows[-1]["elapsed_s"] if rows else 0
    final = [r["rss_kib"] for r in rows if r["elapsed_s"] >= end - window]
    lines = [f"samples: {len(rows)} every ~{xs[1] - xs[0] if len(xs) > 1 else 0} s over {soak_s} s",
             f"load: {rate} msgs/s offered = {percent} % of the measured peak {peak} (publish rates)"]
    ok = True
    if around and final:
        at_mark, at_end = statistics.median(around), statistics.median(final)
        growth = (at_end - at_mark) / at_mark
        memory_ok = abs(growth) <= 0.10
        ok &= memory_ok
        lines.append(f"rss: median {at_mark / 1024:.1f} MiB around {mark} s, median {at_end / 1024:.1f} MiB "
                     f"over the last {window} s ({growth * 100:+.1f} %), min {min(r['rss_kib'] for r in rows) / 1024:.1f}, "
                     f"max {max(r['rss_kib'] for r in rows) / 1024:.1f} MiB: {'pass' if memory_ok else 'FAIL'} (within 10 %)")
        first, last = rows[0], rows[-1]
        lines.append(f"fds: {int(first['fds'])} → {int(last['fds'])}; threads: {int(first['threads'])} → "
                     f"{int(last['threads'])}; tokio tasks {int(first['tasks'])} → {int(last['tasks'])}; topics max {int(max(r['topics'] for r in rows))}; "
                     f"subscriptions max {int(max(r['subscriptions'] for r in rows))}; "
                     f"connections max {int(max(r['connections'] for r in rows))}")
    else:
        ok = False
        lines.append("rss: too few samples for a verdict: FAIL")
    try:
        with open(os.path.join(out_dir, "load.json")) as f:
            res = json.load(f)
        lost, dup, reord = res.get("lost", -1), res.get("duplicates", -1), res.get("reordered", -1)
        loss_ok = load_rc == 0 and lost == 0 and dup == 0 and reord == 0
        lines.append(f"loss: delivered {res.get('delivered')} of {res.get('expected')}, lost {lost}, "
                     f"duplicates {dup}, reordered {reord}, bench exit {load_rc}: "
                     f"{'pass' if loss_ok else 'FAIL'}")
        lat = res.get("latency_us") or {}
        lines.append(f"latency (µs): p50 {lat.get('p50', 0):.0f}, p99 {lat.get('p99', 0):.0f}, "
                     f"p99.9 {lat.get('p999', 0):.0f}, max {lat.get('max', 0):.0f}")
    except (OSError, ValueError, IndexError, KeyError) as e:
        loss_ok = False
        lines.append(f"loss: no readable load result ({e}): FAIL")
    ok &= loss_ok
    lines.append(f"verdict: {'pass' if ok else 'FAIL'}")
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
