"""The latency pass: every target at the same offered load (wrk delay() between requests), and
its report section."""

from collections import defaultdict

from .context import log
from .load import alternating, measured_run
from .report import fmt_range, med, ratio


def latency_pass(ctx, make_backends):
    """Latency at the same offered load: wrk with --latency-conns connections, each waiting
    --latency-delay-ms after every response, on the --zipf workload. {proxy: [results]}."""
    opts = ctx.opts
    results = defaultdict(list)
    for rep, _, zipf, p, b in alternating(ctx, make_backends, [("latency", opts.zipf)]):
        r = measured_run(ctx, p, zipf, opts.duration, seed=rep + 1, backend_pids=b.pids(),
                         conns=opts.latency_conns, delay_ms=opts.latency_delay_ms)
        results[p.name].append(r)
        log(f"  latency rep {rep + 1} {p.name:8} {r['rps']:>10,.0f} req/s p50 {r['p50_us'] / 1000:.3f} "
            f"p99 {r['p99_us'] / 1000:.3f} p99.9 {r['p999_us'] / 1000:.3f} ms errors {r['errors']}")
    return dict(results)


def latency_section(lat, args):
    out = ["## Latency at the same load", "",
           f"wrk -t1 -c{args.latency_conns}, each connection waiting {args.latency_delay_ms} ms after "
           f"every response before its next request (wrk's latency leaves the wait out), so every "
           f"target gets about the same request rate, well below what any of them can serve; "
           f"Zipf s={args.zipf}, {args.duration}s × {args.reps} reps alternating, pinned as in the "
           f"throughput pass, default scheduling. Medians, (min–max) over reps; ratios to HAProxy's "
           f"median (lower is better).", "",
           "| proxy | req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | errors | proxy CPU µs/req | proxy busy "
           "| p50 ÷ HAProxy | p99 ÷ HAProxy | p99.9 ÷ HAProxy |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    h = lat.get("haproxy", [])
    for name, runs in lat.items():
        has_cpu = "cpu_us_per_req" in runs[0]
        out.append("| " + " | ".join([
            name,
            fmt_range([r["rps"] for r in runs], lambda x: f"{x:,.0f}"),
            fmt_range([r["p50_us"] / 1000 for r in runs], lambda x: f"{x:.3f}"),
            fmt_range([r["p90_us"] / 1000 for r in runs], lambda x: f"{x:.3f}"),
            fmt_range([r["p99_us"] / 1000 for r in runs], lambda x: f"{x:.3f}"),
            fmt_range([r["p999_us"] / 1000 for r in runs], lambda x: f"{x:.3f}"),
            str(sum(r["errors"] for r in runs)),
            fmt_range([r["cpu_us_per_req"] for r in runs], lambda x: f"{x:.1f}") if has_cpu else "n/a",
            fmt_range([r["cpu_busy"] * 100 for r in runs], lambda x: f"{x:.0f}%") if has_cpu else "n/a",
        ] + [ratio(med([r[k] for r in runs]), med([r[k] for r in h])) for k in ("p50_us", "p99_us", "p999_us")])
            + " |")
    return "\n".join(out) + "\n"
