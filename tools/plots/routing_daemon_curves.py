#!/usr/bin/env python3
"""Figures and tables of the real-daemon routing benchmark (tools/bench/routing_bench.py).

Usage: tools/plots/routing_daemon_curves.py RESULTS.json [RESULTS.json ...] OUTDIR
(several files: each workload is taken from the last file that has it, so a workload re-run on
its own replaces the earlier one; every proxy of a workload always comes from one run)
Writes OUTDIR/routing_daemon_uniform.svg and OUTDIR/routing_daemon_zipf.svg (miss rate against
max/avg of requests per backend, one point per balance factor) and prints the markdown tables
that docs/routing.md shows.
"""
import json
import os
import sys

SERIES = [("haproxy", "HAProxy 2.6 (hash-balance-factor)", "#1f77b4"),
          ("nginx", "nginx 1.22 (hash consistent, no bound)", "#2ca02c"),
          ("rondel-plain", "rondel, knobs off (plain bounded loads)", "#ff7f0e"),
          ("rondel", "rondel, defaults", "#d62728")]


def pct(x):
    return "%.2f%%" % (100 * x)


def table(runs, workload):
    rows = [r for r in runs if r["workload"] == workload]
    out = ["| proxy | factor | max/avg requests | miss rate | spill (rondel) | of which replica | "
           "all_full picks | req/s | p99 ms | load avg |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, label, _ in SERIES:
        for r in sorted((r for r in rows if r["proxy"] == kind), key=lambda r: r["balance_factor"]):
            spill = pct(r["spill"]) if "spill" in r else "n/a"
            rep = pct(r["replica"]) if "replica" in r else "n/a"
            full = str(r["all_full"]) if "all_full" in r else "n/a"
            out.append("| %s | %s | %.3f | %s | %s | %s | %s | %.0f | %.1f | %s |" % (
                label, r["balance_factor"] or "none", r["req_max_over_avg"], pct(r["miss_rate"]),
                spill, rep, full, r["rps"], r["p99_ms"], r["loadavg"].split()[0]))
    return "\n".join(out)


def svg(path, title, runs, workload):
    rows = [r for r in runs if r["workload"] == workload]
    w, h, margin = 620, 380, 64
    xs = [r["req_max_over_avg"] for r in rows]
    ys = [100 * r["miss_rate"] for r in rows]
    x0, x1 = 1.0, max(xs) * 1.03
    y1 = max(max(ys) * 1.08, 0.5)
    px = lambda x: margin + (x - x0) / (x1 - x0) * (w - margin - 20)
    py = lambda y: 30 + (1 - y / y1) * (h - 30 - margin)
    p = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
         'font-size="11">' % (w, h + 90), '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="14" text-anchor="middle">%s</text>' % (w / 2, title),
         '<rect x="%d" y="30" width="%d" height="%d" fill="none" stroke="#333"/>'
         % (margin, w - margin - 20, h - 30 - margin)]
    for i in range(6):
        xv, yv = x0 + (x1 - x0) * i / 5, y1 * i / 5
        p.append('<text x="%.1f" y="%d" text-anchor="middle">%.2f</text>' % (px(xv), h - margin + 16, xv))
        p.append('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>' % (margin - 4, py(yv) + 4, yv))
        p.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>' % (margin, w - 20, py(yv), py(yv)))
    p.append('<text x="%.1f" y="%d" text-anchor="middle">max/avg of requests per backend</text>'
             % (margin + (w - margin - 20) / 2, h - margin + 34))
    cy = 30 + (h - 30 - margin) / 2
    p.append('<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle">miss rate '
             '(%%)</text>' % (cy, cy))
    for kind, label, colour in SERIES:
        pts = sorted((r for r in rows if r["proxy"] == kind), key=lambda r: r["balance_factor"])
        xy = [(px(r["req_max_over_avg"]), py(100 * r["miss_rate"]), r["balance_factor"]) for r in pts]
        if len(xy) > 1:
            p.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                     % (colour, " ".join("%.1f,%.1f" % (x, y) for x, y, _ in xy)))
        for x, y, f in xy:
            p.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x, y, colour))
            if f:
                p.append('<text x="%.1f" y="%.1f" fill="%s" font-size="9">%d</text>' % (x + 5, y - 5, colour, f))
    for i, (_, label, colour) in enumerate(SERIES):
        lx, ly = 20 + (i % 2) * (w / 2), h + 10 + (i // 2) * 18
        p.append('<circle cx="%d" cy="%d" r="4" fill="%s"/>' % (lx, ly, colour))
        p.append('<text x="%d" y="%d">%s</text>' % (lx + 10, ly + 4, label))
    p.append('<text x="20" y="%d" fill="#555">labels: balance factor (percent); real daemons, '
             'same backends and run; tools/bench/routing_bench.py</text>' % (h + 62))
    p.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(p) + "\n")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    source = {}
    for path in sys.argv[1:-1]:
        with open(path) as f:
            res = json.load(f)
        for wl in {r["workload"] for r in res["runs"]}:
            source[wl] = res
    outdir = sys.argv[-1]
    runs = [r for wl, res in source.items() for r in res["runs"] if r["workload"] == wl]
    svg(os.path.join(outdir, "routing_daemon_uniform.svg"),
        "Uniform keys, fast backends (real daemons)", runs, "uniform")
    svg(os.path.join(outdir, "routing_daemon_zipf.svg"),
        "Zipf 1.1 keys, 5 ms backends (real daemons)", runs, "zipf")
    for wl in ("uniform", "zipf"):
        if wl not in source:
            continue
        res = source[wl]
        print("\n### %s\n" % wl)
        print("command: `%s`; load average (1/5/15 min) at start %s, at end %s, on %d CPUs; %s\n"
              % (res["command"], res["loadavg_start"], res["loadavg_end"], res["nproc"],
                 "; ".join(res["versions"].values())))
        print(table(runs, wl))


if __name__ == "__main__":
    main()
