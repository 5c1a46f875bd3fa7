#!/usr/bin/env python3
"""Plots a recorded autoscaling e2e run: load vs tier over time, as a self-contained SVG.

    e2e/plot-autoscaling.py RECORD.csv OUT.svg [--small-capacity 200]

RECORD.csv is what `autoscaling_moves_small_to_medium_and_back` writes with
STARLING_E2E_AUTOSCALING_RECORD=<file>: one line per 5 s status poll with the observed publish
rate, the effective and rendered tiers and the ready brokers. Nothing is interpolated or
invented: every point is a poll.
"""
import csv
import sys

TIERS = {"small": 0, "medium": 1, "large": 2}


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    src, out = args[0], args[1]
    small_cap = 200.0
    if "--small-capacity" in args:
        small_cap = float(args[args.index("--small-capacity") + 1])
    rows = list(csv.DictReader(open(src)))
    if not rows:
        sys.exit("no rows")
    t = [float(r["seconds"]) for r in rows]
    load = [float(r["publish_msgs_per_sec"]) for r in rows]
    eff = [TIERS.get(r["effective_tier"], TIERS.get(r["tier"], 0)) for r in rows]
    rendered = [TIERS.get(r["tier"], 0) for r in rows]
    ready = [int(r["ready"].split("/")[0] or 0) if "/" in r["ready"] else 0 for r in rows]

    W, H, L, R = 900, 520, 70, 30
    top = (40, 280)      # load panel y range
    bot = (320, 470)     # tier panel y range
    tmax = max(t) or 1.0
    lmax = max(max(load), small_cap) * 1.15

    def x(v):
        return L + (W - L - R) * v / tmax

    def yl(v):
        return top[1] - (top[1] - top[0]) * v / lmax

    def yt(v):
        return bot[1] - (bot[1] - bot[0]) * (v + 0.5) / 3.0

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W/2}" y="20" text-anchor="middle" font-size="15">Tier autoscaling, e2e run: publish load vs tier</text>']
    # The interval in which the bench load ran (the test's "load" phase).
    on = [a for a, r in zip(t, rows) if r.get("phase") == "load"]
    if on:
        x0, x1 = x(min(on)), x(max(on))
        svg.append(f'<rect x="{x0:.1f}" y="{top[0]}" width="{x1-x0:.1f}" height="{bot[1]-top[0]}" fill="#fdf3e1"/>')
        svg.append(f'<text x="{(x0+x1)/2:.1f}" y="{top[0]+14}" text-anchor="middle" fill="#a60">load phase (bench started)</text>')
    # Axes.
    for (y0, y1) in (top, bot):
        svg.append(f'<line x1="{L}" y1="{y1}" x2="{W-R}" y2="{y1}" stroke="black"/>')
        svg.append(f'<line x1="{L}" y1="{y0}" x2="{L}" y2="{y1}" stroke="black"/>')
    step = 60 if tmax > 240 else 30
    s = 0
    while s <= tmax:
        svg.append(f'<line x1="{x(s):.1f}" y1="{bot[1]}" x2="{x(s):.1f}" y2="{bot[1]+4}" stroke="black"/>')
        svg.append(f'<text x="{x(s):.1f}" y="{bot[1]+18}" text-anchor="middle">{int(s)}</text>')
        svg.append(f'<line x1="{x(s):.1f}" y1="{top[0]}" x2="{x(s):.1f}" y2="{top[1]}" stroke="#eee"/>')
        s += step
    svg.append(f'<text x="{(L+W-R)/2}" y="{bot[1]+36}" text-anchor="middle">seconds since the cluster was Ready</text>')
    # Load panel: thresholds of the run (small: up at 80 % of its capacity; medium: down below
    # 50 % of small's capacity).
    for v, label, color in ((small_cap * 0.8, f"scale up: 80% of small ({small_cap*0.8:.0f})", "#c33"),
                            (small_cap * 0.5, f"scale down: 50% of small ({small_cap*0.5:.0f})", "#36c")):
        svg.append(f'<line x1="{L}" y1="{yl(v):.1f}" x2="{W-R}" y2="{yl(v):.1f}" stroke="{color}" stroke-dasharray="5,4"/>')
        svg.append(f'<text x="{W-R-4}" y="{yl(v)-4:.1f}" text-anchor="end" fill="{color}">{label}</text>')
    v = 0.0
    while v <= lmax:
        svg.append(f'<text x="{L-6}" y="{yl(v)+4:.1f}" text-anchor="end">{v:.0f}</text>')
        v += 100 if lmax < 1500 else 500
    svg.append(f'<text x="16" y="{(top[0]+top[1])/2}" transform="rotate(-90 16 {(top[0]+top[1])/2})" text-anchor="middle">observed publish msg/s</text>')
    pts = " ".join(f"{x(a):.1f},{yl(b):.1f}" for a, b in zip(t, load))
    svg.append(f'<polyline points="{pts}" fill="none" stroke="black" stroke-width="1.5"/>')
    for a, b in zip(t, load):
        svg.append(f'<circle cx="{x(a):.1f}" cy="{yl(b):.1f}" r="1.8"/>')
    # Tier panel: effective (chosen) and rendered tier as steps, ready brokers as labels.
    for name, i in TIERS.items():
        svg.append(f'<text x="{L-6}" y="{yt(i)+4:.1f}" text-anchor="end">{name}</text>')
        svg.append(f'<line x1="{L}" y1="{yt(i):.1f}" x2="{W-R}" y2="{yt(i):.1f}" stroke="#eee"/>')

    def steps(vals):
        p = []
        for k, (a, b) in enumerate(zip(t, vals)):
            if k:
                p.append(f"{x(a):.1f},{yt(vals[k-1]):.1f}")
            p.append(f"{x(a):.1f},{yt(b):.1f}")
        return " ".join(p)
    svg.append(f'<polyline points="{steps(eff)}" fill="none" stroke="#c33" stroke-width="2.5"/>')
    svg.append(f'<polyline points="{steps(rendered)}" fill="none" stroke="#36c" stroke-width="1.5" stroke-dasharray="4,3"/>')
    last = None
    for a, n in zip(t, ready):
        if n != last:
            svg.append(f'<text x="{x(a):.1f}" y="{bot[0]-4}" font-size="10" fill="#555">{n}</text>')
            last = n
    svg.append(f'<text x="{L+8}" y="{bot[0]+12}" fill="#c33">status.effectiveTier (chosen)</text>')
    svg.append(f'<text x="{L+200}" y="{bot[0]+12}" fill="#36c">status.tier (rendered)</text>')
    svg.append(f'<text x="{L+360}" y="{bot[0]+12}" fill="#555">grey numbers: ready brokers when it changes</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
