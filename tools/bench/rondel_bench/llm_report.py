"""Figures of one inference-routing run (tools/bench/llm.sh) from the driver's per-request
results and kvsim's /stats, the Markdown table and the SVG picture (TTFT p90 against arrival
rate, one line per policy, log scale)."""

import math

INF = float("inf")


def percentile(xs, q):
    """Nearest-rank percentile of xs (inf counts as larger than everything)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(math.ceil(q * len(s))) - 1))]


def point_figures(results, summary, stats, speedup, spill, proxy_cpu_s):
    """One (policy, rate) point: hit rate, TTFT percentiles (model seconds; a request that
    failed or timed out counts as infinitely slow), output tokens/s, KV use, spill, CPU."""
    ok = [r for r in results if not r["error"] and r["ttft"] is not None]
    ttfts = [r["ttft"] * speedup for r in ok] + [INF] * (len(results) - len(ok))
    prompt = sum(r["prompt"] for r in ok)
    cached = sum(r["cached"] for r in ok)
    ends = [r["scheduled"] / speedup + r["lag"] + r["e2e"] for r in ok]
    span = (max(ends) - min(r["scheduled"] / speedup for r in results)) * speedup if ok else 0
    servers = stats["servers"]
    return {
        "requests": len(results),
        "errors": len(results) - len(ok),
        "hit_rate": cached / prompt if prompt else 0.0,
        "kvsim_hit_rate": stats["total"]["hit_rate"],
        "ttft_p50": percentile(ttfts, 0.50),
        "ttft_p90": percentile(ttfts, 0.90),
        "ttft_p99": percentile(ttfts, 0.99),
        "output_tps": sum(r["output"] for r in ok) / span if span else 0.0,
        "kv_use_max": max(s["kv_use_max"] for s in servers),
        "kv_use_mean": sum(s["kv_use_mean"] for s in servers) / len(servers),
        "max_waiting": max(s["max_waiting"] for s in servers),
        "spill": spill,
        "proxy_cpu_us": proxy_cpu_s / len(results) * 1e6 if results else None,
        "driver_cpu_s": summary["cpu"],
        "driver_lag_p99_ms": summary["lag_p99"] * 1000,
    }


def _s(x):
    if x is None:
        return "n/a"
    if x == INF:
        return "∞"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def table(rows, demand_share):
    """Markdown table: rows = [(rate, policy label, figures)]."""
    out = ["| rate (req/s) | KV demand | policy | hit rate | TTFT p50 | p90 | p99 (s) | "
           "output tok/s | KV use max / mean | spill | proxy CPU/req | errors |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate, label, f in rows:
        cpu = "in kvsim" if f["proxy_cpu_us"] is None else f"{f['proxy_cpu_us']:.0f} µs"
        out.append(f"| {rate:g} | {100 * demand_share[rate]:.0f}% | {label} | "
                   f"{_pct(f['hit_rate'])} | {_s(f['ttft_p50'])} | {_s(f['ttft_p90'])} | "
                   f"{_s(f['ttft_p99'])} | {f['output_tps']:.0f} | "
                   f"{_pct(f['kv_use_max'])} / {_pct(f['kv_use_mean'])} | {_pct(f['spill'])} | "
                   f"{cpu} | {f['errors']} |")
    return "\n".join(out)


COLOURS = ["#d62728", "#ff7f0e", "#7f7f7f", "#9467bd", "#2ca02c", "#1f77b4", "#17becf"]


def svg(path, title, series, rate73=None):
    """series: [(label, [(rate, ttft_p90 seconds)])]; log-scale y; an unfinished point (inf) is
    drawn at the top edge with an arrow."""
    w, h, ml, mr, mt, mb = 640, 380, 64, 20, 34, 48
    rates = sorted({r for _, pts in series for r, _ in pts})
    finite = [y for _, pts in series for _, y in pts if y not in (None, INF) and y > 0]
    if not rates or not finite:
        return
    y0 = 10 ** math.floor(math.log10(min(finite)))
    y1 = 10 ** math.ceil(math.log10(max(finite) * 1.01))
    x0, x1 = min(rates), max(rates)
    if x1 == x0:
        x1 = x0 + 1
    px = lambda x: ml + (x - x0) / (x1 - x0) * (w - ml - mr)  # noqa: E731
    py = lambda y: mt + (1 - (math.log10(y) - math.log10(y0)) /  # noqa: E731
                         (math.log10(y1) - math.log10(y0))) * (h - mt - mb)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" '
             f'height="{h + 20 * len(series) + 10}" font-family="sans-serif" '
             f'font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{w / 2}" y="18" font-size="14" text-anchor="middle">{title}</text>',
             f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="none" '
             'stroke="#333"/>']
    decade = y0
    while decade <= y1 * 1.001:
        parts.append(f'<line x1="{ml}" x2="{w - mr}" y1="{py(decade):.1f}" '
                     f'y2="{py(decade):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{ml - 4}" y="{py(decade) + 4:.1f}" text-anchor="end">'
                     f'{decade:g}</text>')
        decade *= 10
    for r in rates:
        parts.append(f'<text x="{px(r):.1f}" y="{h - mb + 16}" text-anchor="middle">{r:g}</text>')
    if rate73 is not None:
        parts.append(f'<line x1="{px(rate73):.1f}" x2="{px(rate73):.1f}" y1="{mt}" '
                     f'y2="{h - mb}" stroke="#999" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{px(rate73) + 4:.1f}" y="{mt + 12}" fill="#666">73% KV demand'
                     '</text>')
    parts.append(f'<text x="{ml + (w - ml - mr) / 2}" y="{h - 10}" text-anchor="middle">'
                 'arrival rate (requests per model second)</text>')
    cy = mt + (h - mt - mb) / 2
    parts.append(f'<text x="14" y="{cy}" transform="rotate(-90 14 {cy})" '
                 'text-anchor="middle">TTFT p90 (model seconds, log)</text>')
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        xy = [(px(r), py(min(y, y1)) if y not in (None, INF) else mt) for r, y in pts
              if y is not None]
        if len(xy) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>')
        for (x, y), (_, v) in zip(xy, [p for p in pts if p[1] is not None]):
            if v == INF:
                parts.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" fill="{colour}" '
                             'text-anchor="middle">▲</text>')
            else:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        lx, ly = 20, h + 16 + i * 20
        parts.append(f'<circle cx="{lx}" cy="{ly}" r="4" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 10}" y="{ly + 4}">{label}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def svg_from_results(results, path):
    """Redraws the picture of a results JSON written by llm_bench.py."""
    by = {}
    for p in results["points"]:
        by.setdefault(p["policy"], (p["label"], []))[1].append((p["rate"], p["ttft_p90"]))
    series = [(label, sorted(pts)) for label, pts in by.values()]
    a = results["args"]
    svg(path, f"TTFT p90, {a['trace']} trace, {a['servers']} kvsim servers", series, a["rate73"])
