#!/usr/bin/env python3
"""Runs rondel-sim's routing replay for every policy and writes the curves of docs/routing.md.

Usage: tools/plots/routing_curves.py PATH/TO/rondel-sim [OUT_DIR]   (OUT_DIR: docs/img)

For each workload (uniform keys with fast backends; Zipf 1.1 with 5 ms backends) it sweeps the
balance factor over 110, 125, 150, 200 for every series, prints Markdown tables (preceded by the
exact commands) and writes OUT_DIR/routing_<workload>.svg: miss rate and overflow spill against
max/avg of requests. The SVG is written by hand (no plotting library needed).
"""
import json
import os
import shlex
import subprocess
import sys

FACTORS = [110, 125, 150, 200]
COMMON = ["--routing", "--backends", "4", "--keys", "10000", "--clients", "50",
          "--miss-delay", "2", "--cache-objects", "3000", "--requests", "2000000",
          "--warmup", "1000000"]
WORKLOADS = {
    "uniform": ("Uniform keys, fast backends (T = 0.2 ms)", ["--zipf", "0", "--mean-service", "0.2"]),
    "zipf": ("Zipf 1.1 keys, 5 ms backends", ["--zipf", "1.1", "--mean-service", "5"]),
}
RONDEL = ["--policy", "rondel", "--algo", "maglev"]
SERIES = [
    # label, flags, colour, sweep?
    ("HAProxy-like (16 pts, plain bound)", ["--policy", "haproxy"], "#d62728", True),
    ("nginx-like (160 pts, no bound)", ["--policy", "nginx"], "#7f7f7f", False),
    ("rondel bounded_pick (Maglev)", ["--policy", "bounded", "--algo", "maglev"], "#ff7f0e", True),
    ("rondel + slack 8", RONDEL + ["--slack", "8"], "#9467bd", True),
    ("rondel + hot replicas", RONDEL + ["--hot-share", "10"], "#17becf", True),
    ("rondel (slack 8, hot replicas, spill memory)",
     RONDEL + ["--slack", "8", "--hot-share", "10", "--spill-memory", "4096"], "#2ca02c", True),
]


def run(sim, args):
    """Runs rondel-sim with args + --json; returns the parsed JSON lines."""
    out = subprocess.run([sim] + args + ["--json"], check=True, capture_output=True,
                         text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def sweep(sim, workload):
    """Returns [(label, colour, command, rows)] for one workload."""
    results = []
    for label, flags, colour, swept in SERIES:
        args = COMMON + WORKLOADS[workload][1] + flags
        args += ["--sweep", ",".join(map(str, FACTORS))] if swept else ["--balance-factor", "0"]
        rows = run(sim, args)
        results.append((label, colour, "rondel-sim " + shlex.join(args + ["--json"]), rows))
        print("  ran %s" % label, file=sys.stderr)
    return results


def table(title, results):
    print("### %s\n" % title)
    print("Commands:\n\n```")
    for _, _, cmd, _ in results:
        print(cmd)
    print("```\n")
    print("| series | factor | max/avg requests | max/avg in flight (mean / peak) | spill | "
          "of which overflow | replica | miss rate | keys on >1 backend | cap violations |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, _, _, rows in results:
        for r in rows:
            f = "%.2f" % (r["balance_factor"] / 100) if r["balance_factor"] else "none"
            print("| %s | %s | %.3f | %.3f / %.2f | %.2f%% | %.2f%% | %.2f%% | %.4f%% | %.1f%% | %d |"
                  % (label, f, r["req_max_over_avg"], r["inflight_mean_max_over_avg"],
                     r["inflight_peak_max_over_avg"], 100 * r["spill"],
                     100 * (r["spill_overflow"] + r["spill_sticky"]), 100 * r["spill_replica"],
                     100 * r["miss_rate"], 100 * r["keys_multi_backend"], r["cap_violations"]))
    print()


def svg(path, title, results):
    """Two panels side by side: miss rate and overflow spill (%) against max/avg of requests."""
    w, h, margin = 460, 340, 60
    panels = [("miss rate (%)", lambda r: 100 * r["miss_rate"]),
              ("overflow spill (%)", lambda r: 100 * (r["spill_overflow"] + r["spill_sticky"]))]
    xs = [r["req_max_over_avg"] for _, _, _, rows in results for r in rows]
    x0, x1 = 1.0, max(xs) * 1.03
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" font-size="11">' % (2 * w, h + 120),
             '<rect width="100%" height="100%" fill="white"/>',
             '<text x="%d" y="18" font-size="14" text-anchor="middle">%s</text>' % (w, title)]
    for p, (ylabel, fy) in enumerate(panels):
        ox = p * w
        ys = [fy(r) for _, _, _, rows in results for r in rows]
        y1 = max(max(ys) * 1.08, 0.5)
        px = lambda x: ox + margin + (x - x0) / (x1 - x0) * (w - margin - 20)
        py = lambda y: 30 + (1 - y / y1) * (h - 30 - margin)
        parts.append('<rect x="%d" y="30" width="%d" height="%d" fill="none" stroke="#333"/>'
                     % (ox + margin, w - margin - 20, h - 30 - margin))
        for i in range(6):
            xv = x0 + (x1 - x0) * i / 5
            yv = y1 * i / 5
            parts.append('<text x="%.1f" y="%d" text-anchor="middle">%.2f</text>'
                         % (px(xv), h - margin + 16, xv))
            parts.append('<text x="%d" y="%.1f" text-anchor="end">%.2g</text>'
                         % (ox + margin - 4, py(yv) + 4, yv))
            parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>'
                         % (ox + margin, ox + w - 20, py(yv), py(yv)))
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">max/avg of requests per backend'
                     '</text>' % (ox + margin + (w - margin - 20) / 2, h - margin + 34))
        parts.append('<text x="%d" y="%.1f" transform="rotate(-90 %d %.1f)" '
                     'text-anchor="middle">%s</text>'
                     % (ox + 16, 30 + (h - 30 - margin) / 2, ox + 16, 30 + (h - 30 - margin) / 2,
                        ylabel))
        for label, colour, _, rows in results:
            pts = [(px(r["req_max_over_avg"]), py(fy(r)), r["balance_factor"]) for r in rows]
            if len(pts) > 1:
                parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                             % (colour, " ".join("%.1f,%.1f" % (x, y) for x, y, _ in pts)))
            for x, y, f in pts:
                parts.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x, y, colour))
                if f and colour in ("#d62728", "#ff7f0e"):
                    parts.append('<text x="%.1f" y="%.1f" fill="%s" font-size="9">%d</text>'
                                 % (x + 5, y - 5, colour, f))
    for i, (label, colour, _, _) in enumerate(results):
        lx, ly = 20 + (i % 2) * w, h + 10 + (i // 2) * 18
        parts.append('<circle cx="%d" cy="%d" r="4" fill="%s"/>' % (lx, ly, colour))
        parts.append('<text x="%d" y="%d">%s</text>' % (lx + 10, ly + 4, label))
    parts.append('<text x="20" y="%d" fill="#555">labels: balance factor (percent); rondel '
                 'series with slack 8 coincide at factors up to 168</text>' % (h + 112))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sim = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "docs/img"
    os.makedirs(out_dir, exist_ok=True)
    for workload, (title, _) in WORKLOADS.items():
        results = sweep(sim, workload)
        table(title, results)
        svg(os.path.join(out_dir, "routing_%s.svg" % workload), title, results)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
