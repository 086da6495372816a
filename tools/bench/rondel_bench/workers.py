"""The workers pass: rondel workers 1 vs 2 and HAProxy nbthread 1 vs 2, nothing pinned; and its
report section."""

import os
from collections import defaultdict

from .context import log
from .load import measured_run
from .proxies import HAProxy, Rondel
from .report import fmt_range, med, ratio

# The workers pass: (proxy class, workers/threads), measured in this order in every rep.
WORKER_CONFIGS = ((Rondel, 1), (Rondel, 2), (HAProxy, 1), (HAProxy, 2))


def worker_setting(name, n):
    return f"`workers: {n}`" if name == "rondel" else f"`nbthread {n}`"


def workers_pass(ctx, make_backends):
    """rondel workers 1 vs 2 and HAProxy nbthread 1 vs 2 with the throughput configurations
    otherwise, the throughput load (the --zipf workload), nothing pinned: the proxy, wrk and the
    backends all run on any core. Reps alternate the four configurations."""
    opts = ctx.opts
    runs = defaultdict(list)
    b = make_backends(core=None)
    proxies = []
    try:
        for cls, n in WORKER_CONFIGS:
            proxies.append((f"{cls.name}/{n}", cls(ctx, b, workers=n, core=None)))
        for rep in range(opts.reps):
            for key, p in proxies:
                r = measured_run(ctx, p, opts.zipf, opts.duration, seed=rep + 1, pinned=False)
                runs[key].append(r)
                log(f"  workers rep {rep + 1} {key:10} {r['rps']:>10,.0f} req/s p99 {r['p99_us'] / 1000:.2f} ms"
                    f" cpu {r['cpu_us_per_req']:.1f} us/req busy {r['cpu_busy'] * 100:.0f}%"
                    f" machine {r['machine_busy'] * 100:.0f}% errors {r['errors']} load {r['loadavg']}")
    finally:
        for _, p in proxies:
            p.stop()
        b.stop()
    return {"zipf": opts.zipf, "reps": opts.reps, "duration": opts.duration, "conns": opts.conns,
            "backends": opts.backends, "backend_kind": b.kind, "nice": opts.nice,
            "cpus": os.cpu_count(), "runs": dict(runs)}


def _workers_preamble(w):
    cpus = w["cpus"]
    load = f"Zipf s={w['zipf']}" if w["zipf"] else "uniform"
    return [f"## Workers (unpinned, {cpus} cores)", "",
            f"rondel `workers: 1` vs `workers: 2` (event loops with SO_REUSEPORT listeners, shared "
            f"in-flight counts) and HAProxy `nbthread 1` vs `nbthread 2` as the reference, each with "
            f"the throughput configuration otherwise; wrk -t1 -c{w['conns']} ({load}) against "
            f"{w['backends']} {w['backend_kind']} backends, {w['duration']}s × {w['reps']} reps "
            f"alternating the four configurations, nice {w['nice']}. Nothing is pinned: the proxy, wrk "
            f"and the backends share all {cpus} cores. On a {cpus}-core machine where the client and the "
            f"backends need CPU too, this shows the overhead or benefit of a second event loop under "
            f"contention, not scaling. Medians, (min–max) over reps. Proxy busy = proxy CPU time / wall "
            f"time (can exceed 100% with 2 threads); machine busy = non-idle time of all cores / "
            f"({cpus} × wall), and machine µs/req counts wrk, the backends and anything else running "
            f"too. Ratios: each 2-thread median ÷ the same proxy's 1-thread median.", "",
            "| proxy | setting | req/s | p99 ms | errors | proxy CPU µs/req | proxy busy | "
            "machine busy | machine µs/req | peak RSS MiB | req/s 2÷1 | p99 2÷1 | CPU/req 2÷1 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]


def workers_section(w):
    out = _workers_preamble(w)
    runs = w["runs"]
    for key, rs in runs.items():
        name, n = key.split("/")
        base = runs[f"{name}/1"]
        rps = [r["rps"] for r in rs]
        cpu = [r["cpu_us_per_req"] for r in rs]
        out.append("| " + " | ".join([
            name, worker_setting(name, n),
            fmt_range(rps, lambda x: f"{x:,.0f}"),
            fmt_range([r["p99_us"] / 1000 for r in rs], lambda x: f"{x:.2f}"),
            str(sum(r["errors"] for r in rs)),
            fmt_range(cpu, lambda x: f"{x:.1f}"),
            fmt_range([r["cpu_busy"] * 100 for r in rs], lambda x: f"{x:.0f}%"),
            fmt_range([r["machine_busy"] * 100 for r in rs], lambda x: f"{x:.0f}%"),
            fmt_range([r["machine_us_per_req"] for r in rs], lambda x: f"{x:.1f}"),
            f"{max(r['rss_kib'] for r in rs) / 1024:.1f}",
            ratio(med(rps), med([r["rps"] for r in base])),
            ratio(med([r["p99_us"] for r in rs]), med([r["p99_us"] for r in base])),
            ratio(med(cpu), med([r["cpu_us_per_req"] for r in base])),
        ]) + " |")
    out.append("")
    out.append("Load average at the start of each measured run: " + "; ".join(
        f"{key}: " + ", ".join(r["loadavg"].split()[0] for r in rs) for key, rs in runs.items()))
    return "\n".join(out) + "\n"
