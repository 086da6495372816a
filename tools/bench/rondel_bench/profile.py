"""The profile pass: syscalls per request of each proxy and of the backends behind it (perf
stat), context switches and TCP segments per request, and a perf record of rondel with its
reports. Written to results/perf-rondel-DATE.txt."""

import json
import os
import re
import shutil
import signal
import subprocess
import time

from rondel_support import procfs

from .context import CLIENT_CORE, LUA, PROXY_CORE, log
from .load import run_wrk
from .proxies import HAProxy, Nginx, Rondel

ORDER = ("rondel", "haproxy", "nginx")

# perf report runs: (title, extra arguments, lines kept).
PERF_REPORTS = (
    ("share of samples by object", ["--no-children", "--sort", "dso", "-g", "none"], 25),
    ("self time by symbol", ["--no-children", "--sort", "dso,symbol", "-g", "none"], 60),
    ("user space only (rondel, libuv, libc, libstdc++), % of all samples",
     ["--no-children", "--sort", "dso,symbol", "-g", "none",
      "--dsos", "rondel,libuv.so.1.0.0,libc.so.6,libstdc++.so.6.0.30"], 40),
    ("including children", ["--children", "--sort", "symbol", "-g", "none"], 60))

# Whole-report sums of self time by category: symbol substrings.
CATEGORIES = {"allocation (malloc/free/new/delete)": ("malloc", "free", "operator new",
                                                     "operator delete", "_int_", "tcache"),
              "logging (LogSink, Logger, access log)": ("LogSink", "Logger", "access_log", "AccessLog"),
              "HTTP parsing and head writing (rondel::http, llhttp)": ("rondel::http::", "llhttp"),
              "routing (rondel::core, RouteStates)": ("rondel::core::", "RouteStates")}


def tcp_out_segments():
    """The kernel's TcpOutSegs counter (all TCP segments sent on the machine; on loopback each
    segment is counted once, by its sender)."""
    out = subprocess.run(["nstat", "-az", "--json", "TcpOutSegs"], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)["kernel"]["TcpOutSegs"]
    except (ValueError, KeyError):
        return None


def syscall_counts(ctx, pids, url, zipf, seconds=5, backend_pids=(), load=None):
    """Syscalls made by pids while wrk runs for `seconds` (or `load()`, any load returning a dict
    with "requests"): {name: count}, and the load's result (with "segments": TCP segments sent
    machine-wide meanwhile, when nstat is there, and the context switches of the proxy, of the
    backends and of the whole machine)."""
    p = ctx.registry.popen(["taskset", "-c", CLIENT_CORE, "perf", "stat", "-x", ",", "-e",
                            "syscalls:sys_enter_*", "-p", ",".join(str(x) for x in pids)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # perf stat attaching
    seg0 = tcp_out_segments() if shutil.which("nstat") else None
    sw0 = (procfs.voluntary_switches(pids), procfs.voluntary_switches(backend_pids),
           procfs.machine_switches())
    r = load() if load is not None else run_wrk(ctx, url, seconds, zipf, seed=3)
    sw1 = (procfs.voluntary_switches(pids), procfs.voluntary_switches(backend_pids),
           procfs.machine_switches())
    seg1 = tcp_out_segments() if seg0 is not None else None
    r["switches"] = {"proxy_voluntary": sw1[0] - sw0[0], "backends_voluntary": sw1[1] - sw0[1],
                     "machine": sw1[2] - sw0[2]}
    if seg0 is not None and seg1 is not None:
        r["segments"] = seg1 - seg0
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    ctx.registry.forget(p)
    counts = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].startswith("syscalls:sys_enter_") and f[0].isdigit() and int(f[0]) > 0:
            counts[f[2][len("syscalls:sys_enter_"):]] = int(f[0])
    return counts, r


def syscall_table(tables, order):
    """Lines of a syscalls-per-request table: tables = {proxy: syscall_counts(...) result}, one
    column per proxy in `order`, rows by the first column's counts, then the total."""
    names = sorted({n for sc, _ in tables.values() for n in sc}, key=lambda n: -tables[order[0]][0].get(n, 0))
    lines = [f"{'syscall':20}" + "".join(f"{p:>12}" for p in order)]
    for n in names + ["total"]:
        row = f"{n:20}"
        for p in order:
            sc, sr = tables[p]
            v = sum(sc.values()) if n == "total" else sc.get(n, 0)
            row += f"{v / max(1, sr['requests']):12.3f}"
        lines.append(row)
    return lines


def syscall_lines(sys_tables, backend_sys, order=ORDER):
    """The syscall, segment and context-switch part of the profile file."""
    out = ["## syscalls per request under the same load (perf stat -e 'syscalls:sys_enter_*' -p PIDs, 5 s)\n"]
    out += syscall_table(sys_tables, order)
    out.append(f"{'(requests)':20}" + "".join(f"{sys_tables[p][1]['requests']:>12,}" for p in order))
    if all("segments" in sys_tables[p][1] for p in order):
        out.append(f"{'TCP segments':20}" + "".join(
            f"{sys_tables[p][1]['segments'] / max(1, sys_tables[p][1]['requests']):12.3f}" for p in order)
            + "   (per request, all four legs, machine-wide: nstat TcpOutSegs)")
    for key, label in (("proxy_voluntary", "proxy blocked"), ("backends_voluntary", "backends blocked"),
                       ("machine", "context switches")):
        out.append(f"{label:20}" + "".join(
            f"{sys_tables[p][1]['switches'][key] / max(1, sys_tables[p][1]['requests']):12.3f}" for p in order)
            + ("   (per request: voluntary context switches, /proc/PID/task/*/status)" if key != "machine"
               else "   (per request, machine-wide: /proc/stat ctxt)"))
    out.append("")
    out.append("## the backends' syscalls per request behind each proxy (same method, "
               "perf stat -p on the backend processes, 5 s)\n")
    out += syscall_table(backend_sys, order)
    return out


def category_sums(lines):
    """{category: sum of self %} over the lines of a `--sort dso,symbol` report (user space)."""
    sums = {k: 0.0 for k in CATEGORIES}
    for line in lines:
        f = line.split()
        if not f or not f[0].endswith("%") or "[k]" in line:
            continue
        sym = line.split("[.]", 1)[-1]
        for k, pats in CATEGORIES.items():
            if any(p in sym for p in pats):
                sums[k] += float(f[0][:-1])
    return sums


def perf_reports(data):
    """The perf report sections of the profile file, from perf.data at `data`."""
    reports = []
    for title, extra, n in PERF_REPORTS:
        rep = subprocess.run(["perf", "report", "--stdio", "-i", data] + extra,
                             capture_output=True, text=True, timeout=300).stdout
        # Without the empty trailing columns ("-  -") and the padding a long symbol leaves.
        lines = [re.sub(r"(\s+-)*\s*$", "", line) for line in rep.splitlines()
                 if line.strip() and not line.startswith("#")]
        if extra[-1] == "none" and "dso,symbol" in extra and "--dsos" not in extra:
            # Whole-report sums by category (the list below is cut at n lines).
            sums = category_sums(lines)
            reports.append("## user-space categories (sum of self % over the whole report)\n\n"
                           + "\n".join(f"{k}: {v:.2f}%" for k, v in sums.items()) + "\n")
        reports.append(f"## {title}: perf report --stdio {' '.join(extra)} (first {n} lines)\n\n"
                       + "\n".join(lines[:n]) + "\n")
    return reports


def record(ctx, r, zipf, data):
    """perf record -g of rondel `r` under wrk for --profile-duration s; the load average."""
    opts = ctx.opts
    wrk = ctx.registry.popen(
        list(ctx.nice) + ["taskset", "-c", CLIENT_CORE, "wrk", "-t1", f"-c{opts.conns}",
                          f"-d{opts.profile_duration + 2}s", "--timeout", "2s", "-s", LUA, r.url()],
        env=dict(os.environ, BENCH_PATHS=str(opts.paths), BENCH_ZIPF=str(zipf)),
        stdout=subprocess.DEVNULL)
    time.sleep(1)  # wrk's connections established before the recording starts
    la = procfs.loadavg()
    subprocess.run(["taskset", "-c", CLIENT_CORE, "perf", "record", "-g", "-o", data, "-p", str(r.proc.pid),
                    "--", "sleep", str(opts.profile_duration)],
                   capture_output=True, timeout=opts.profile_duration + 60)
    wrk.wait(opts.profile_duration + 30)
    ctx.registry.forget(wrk)
    return la


def profile(ctx, make_backends, zipf, outdir, stamp):
    """Syscall counts behind each proxy, then a perf profile of rondel; the file's path."""
    opts = ctx.opts
    b = make_backends(ledger=False)
    try:
        r = Rondel(ctx, b, bounded=True)
        run_wrk(ctx, r.url(), 1, zipf)
        sys_tables = {}
        backend_sys = {}  # the backends' syscalls per request behind each proxy
        for cls in (HAProxy, Nginx):
            other = cls(ctx, b, bounded=True)
            run_wrk(ctx, other.url(), 1, zipf)
            sys_tables[cls.name] = syscall_counts(ctx, other.pids(), other.url(), zipf,
                                                  backend_pids=b.pids())
            backend_sys[cls.name] = syscall_counts(ctx, b.pids(), other.url(), zipf)
            other.stop()
        sys_tables["rondel"] = syscall_counts(ctx, r.pids(), r.url(), zipf, backend_pids=b.pids())
        backend_sys["rondel"] = syscall_counts(ctx, b.pids(), r.url(), zipf)
        data = os.path.join(ctx.workdir, "perf.data")
        la = record(ctx, r, zipf, data)
        r.stop()
        reports = perf_reports(data)
        path = os.path.join(outdir, f"perf-rondel-{stamp}.txt")
        with open(path, "w") as f:
            f.write(f"# rondel under wrk -t1 -c{opts.conns}, Zipf s={zipf}, {opts.backends} backends "
                    f"({b.kind}), rondel pinned to core {PROXY_CORE}; perf record -g -p PID for "
                    f"{opts.profile_duration}s; load average {la}\n\n")
            f.write("\n".join(syscall_lines(sys_tables, backend_sys)) + "\n\n")
            f.write("\n".join(reports))
        log(f"profile written to {path}")
        return path
    finally:
        b.stop()
