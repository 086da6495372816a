"""Report formatting shared by the passes: medians with ranges, ratios, the run header, the
throughput tables (also used by the SCHED_BATCH pass) and the main report."""

import statistics

from .context import CLIENT_CORE, PROXY_CORE
from .distribution import distribution_lines


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_range(xs, f):
    """f(median) and, over several values, "(f(min)–f(max))"; "n/a" for none."""
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return f(xs[0])
    return f"{f(med(xs))} ({f(min(xs))}–{f(max(xs))})"


def ratio(a, b):
    return f"{a / b:.2f}" if b else "n/a"


def header(meta):
    return [f"Command: `{meta['command']}`  ",
            f"Date: {meta['date']}; host: {meta['host']}; load average before/after: "
            f"{meta['load_before']} / {meta['load_after']}  ",
            f"Versions: {meta['versions']}  "]


MAIN_TABLE_HEAD = (
    "| workload | proxy | req/s | p50 ms | p99 ms | errors | proxy CPU µs/req | core 0 µs/req | proxy busy | core 0 / 1 busy | preempt/s | peak RSS MiB | req/s ÷ HAProxy | p99 ÷ HAProxy | CPU/req ÷ HAProxy | RSS ÷ HAProxy |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _main_row(wl, name, runs, h):
    """One row of the req/s, latency, CPU and RSS table; h: HAProxy's runs."""
    rps = [r["rps"] for r in runs]
    has_cpu = "cpu_us_per_req" in runs[0]
    cpu = [r["cpu_us_per_req"] for r in runs] if has_cpu else []
    rss = [r["rss_kib"] / 1024 for r in runs] if has_cpu else []
    return "| " + " | ".join([
        wl, name,
        fmt_range(rps, lambda x: f"{x:,.0f}"),
        fmt_range([r["p50_us"] / 1000 for r in runs], lambda x: f"{x:.2f}"),
        fmt_range([r["p99_us"] / 1000 for r in runs], lambda x: f"{x:.2f}"),
        str(sum(r["errors"] for r in runs)),
        fmt_range(cpu, lambda x: f"{x:.1f}"),
        fmt_range([r["core0_us_per_req"] for r in runs], lambda x: f"{x:.1f}") if has_cpu else "n/a",
        fmt_range([r["cpu_busy"] * 100 for r in runs] if has_cpu else [], lambda x: f"{x:.0f}%"),
        f"{med([r['core0_busy'] * 100 for r in runs]):.0f}% / {med([r['core1_busy'] * 100 for r in runs]):.0f}%",
        f"{med([r['preempted_per_s'] for r in runs]):.0f}" if has_cpu else "n/a",
        f"{max(rss):.1f}" if rss else "n/a",
        ratio(med(rps), med([r["rps"] for r in h])),
        ratio(med([r["p99_us"] for r in runs]), med([r["p99_us"] for r in h])),
        ratio(med(cpu), med([r["cpu_us_per_req"] for r in h])) if has_cpu else "n/a",
        ratio(med([r["rss_kib"] for r in runs]), med([r["rss_kib"] for r in h])) if has_cpu else "n/a",
    ]) + " |"


def _client_core_lines(results):
    """The table of where the client core spends its time per request, with its preamble."""
    out = [f"Where the client core (core {CLIENT_CORE}: wrk and the backends) spends its time, per "
           "request, in the same runs. With a proxy that leaves its own core idle, this core "
           "sets req/s. Backends = CPU time of the backend processes (/proc/PID/stat, their "
           "kernel work included); the rest is wrk and interrupts. Wake-up IPIs received per "
           "1,000 requests (/proc/interrupts): RES = rescheduling, CAL = function call.",
           "",
           f"| workload | proxy | core {CLIENT_CORE} µs/req | backends µs/req | wrk and rest µs/req "
           f"| RES IPIs to core {CLIENT_CORE} | CAL IPIs to core {PROXY_CORE} | backends µs/req ÷ HAProxy |",
           "|---|---|---|---|---|---|---|---|"]
    for wl, by_proxy in results.items():
        h_bk = med([r["backends_us_per_req"] for r in by_proxy.get("haproxy", [])])
        for name, runs in by_proxy.items():
            if "backends_us_per_req" not in runs[0]:
                continue
            c1 = [r["core1_us_per_req"] for r in runs]
            bk = [r["backends_us_per_req"] for r in runs]
            rest = [x - y for x, y in zip(c1, bk)]
            out.append("| " + " | ".join([
                wl, name,
                fmt_range(c1, lambda x: f"{x:.1f}"),
                fmt_range(bk, lambda x: f"{x:.2f}"),
                fmt_range(rest, lambda x: f"{x:.2f}"),
                f"{med([r.get(f'ipi_RES{CLIENT_CORE}_per_1k', 0) for r in runs]):.0f}",
                f"{med([r.get(f'ipi_CAL{PROXY_CORE}_per_1k', 0) for r in runs]):.0f}",
                ratio(med(bk), h_bk),
            ]) + " |")
    return out


def throughput_tables(results):
    """The req/s, latency, CPU and RSS table and the client-core table of one throughput pass
    (lines of markdown). results: {workload: {proxy: [load.measured_run results]}}."""
    out = ["Medians, (min–max) over reps. Ratios are to HAProxy in the same run "
           "(req/s: higher is better; p99, CPU, RSS: lower is better).", ""]
    out += MAIN_TABLE_HEAD
    for wl, by_proxy in results.items():
        h = by_proxy.get("haproxy", [])
        out += [_main_row(wl, name, runs, h) for name, runs in by_proxy.items()]
    out.append("")
    out += _client_core_lines(results)
    out.append("")
    out.append("Load average at the start of each measured run: " + "; ".join(
        f"{wl}/{name}: " + ", ".join(r["loadavg"].split()[0] for r in runs)
        for wl, by_proxy in results.items() for name, runs in by_proxy.items()))
    return out


def batch_section(batch, args):
    """The SCHED_BATCH pass: the throughput tables again, with their own heading."""
    return "\n".join([
        "## Client core under SCHED_BATCH",
        "",
        f"The same throughput pass again ({args.duration}s × {args.reps} reps, alternating, same "
        f"pinning), with wrk and the backends started under `chrt -b 0` (SCHED_BATCH: a task "
        f"woken on core {CLIENT_CORE} does not preempt the one running there; it waits for its "
        f"turn). The proxies run with the default policy as before. Each wake-up preemption costs "
        f"an inter-processor interrupt and a context switch on core {CLIENT_CORE}, so with the "
        f"default policy a proxy's req/s depends on how its writes happen to interleave with wrk "
        f"and the backends; without them the client core is cheaper per request and the proxy's "
        f"own core becomes the limit, so req/s ranks the proxies by their own cost.",
        ""] + throughput_tables(batch)) + "\n"


def tables(results, dist_rows, calib, args, meta):
    """The main report: header, run parameters, calibration, throughput and distribution."""
    out = header(meta)
    out.append(f"Backends: {args.backends} × {meta['backend_kind']}; conns {args.conns}; wrk -t1; "
               f"{args.duration}s × {args.reps} reps (alternating); paths {args.paths}; Zipf s={args.zipf}; "
               f"nice {args.nice}  ")
    if calib:
        out.append("Backend calibration (wrk → one backend, backend CPU µs/req): " + ", ".join(
            f"{k} {v['cpu_us_per_req']:.2f}" for k, v in calib.items()))
    out.append("")
    out += throughput_tables(results)
    out += distribution_lines(dist_rows, meta.get("dist_checks"))
    return "\n".join(out) + "\n"
