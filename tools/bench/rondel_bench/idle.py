"""The idle-connection pass: memory per idle keep-alive client connection of each proxy (RSS
at N/5 and at N connections), alternating over reps; and its report section. The client is this
process, pinned to the client core for the pass with its open-file limit raised."""

import os
import resource
import select
import time
from collections import defaultdict

from rondel_support import procfs
from rondel_support.httpio import HttpConn

from .backends import TestBackends
from .context import CLIENT_CORE, log
from .proxies import HAProxy, Nginx, Rondel
from .report import fmt_range, med, ratio

IDLE_BATCH = 100         # connections opened, then sent a request, then read, per step
IDLE_FILL_DEADLINE = 45  # s to open all N connections: below every proxy's keep-alive timeout
                         # (rondel idle_timeout 60s, HAProxy timeout http-keep-alive 60s, nginx
                         # keepalive_timeout 75s), so none closes the first connections meanwhile
IDLE_SETTLE = 0.5        # s between the last response and an RSS reading
IDLE_SOCK_TIMEOUT = 10   # s per connect/send/recv


def idle_request(port, i, paths):
    return (f"GET /obj/{(i - 1) % paths + 1} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "User-Agent: rondel-bench-idle\r\nAccept: */*\r\n\r\n").encode()


def read_keepalive_200(conn):
    """Reads one complete response on `conn` (an HttpConn); fails unless it is a 200 with a
    Content-Length, not Connection: close, and nothing after it."""
    status, headers, raw = conn.read_head()
    if status != 200:
        first = raw.split(b"\r\n")[0]
        raise RuntimeError(f"unexpected response: {first!r}")
    if headers.get("connection", "").lower() == "close":
        raise RuntimeError("the proxy answered with Connection: close")
    if "content-length" not in headers:
        raise RuntimeError("response without Content-Length")
    conn.read_body(status, headers)
    if conn.buf:
        raise RuntimeError(f"{len(conn.buf)} bytes after the response")


def idle_fill(port, conns, upto, paths, deadline):
    """Open connections (in batches) until len(conns) == upto; one request and its complete
    response on each; the connections stay open (appended to conns, closed by the caller)."""
    while len(conns) < upto:
        if time.time() > deadline:
            raise RuntimeError(f"idle pass: could not open {upto} connections within "
                               f"{IDLE_FILL_DEADLINE}s (got {len(conns)})")
        batch = []
        for _ in range(min(IDLE_BATCH, upto - len(conns))):
            c = HttpConn(port, timeout=IDLE_SOCK_TIMEOUT)
            conns.append(c)
            batch.append((len(conns), c))
        for i, c in batch:
            c.send(idle_request(port, i, paths))
        for _, c in batch:
            read_keepalive_200(c)


def idle_closed_count(conns):
    """Connections with something to read (EOF: closed by the proxy) or an error."""
    p = select.poll()
    for c in conns:
        p.register(c.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return len(p.poll(0))


def warm_up(port, paths):
    """A few hundred requests on a handful of connections (first-use allocations)."""
    warm = [HttpConn(port, timeout=IDLE_SOCK_TIMEOUT) for _ in range(8)]
    try:
        for rnd in range(50):
            for j, c in enumerate(warm):
                c.send(idle_request(port, rnd * len(warm) + j + 1, paths))
            for c in warm:
                read_keepalive_200(c)
    finally:
        for c in warm:
            c.close()


def idle_run(ctx, cls, backends, n):
    """One proxy: warm up, then RSS after N/5 and after N idle keep-alive connections."""
    paths = ctx.opts.paths
    t_start = time.time()
    proxy = cls(ctx, backends, bounded=True, idle=n)
    conns = []
    try:
        pid = proxy.proc.pid
        if cls is Rondel and procfs.comm(pid) != "rondel":
            raise RuntimeError(f"pid {pid} is {procfs.comm(pid)!r}, not rondel (prlimit did not exec?)")
        warm_up(proxy.port, paths)
        time.sleep(IDLE_SETTLE)  # a settled RSS reading, not a synchronisation
        la = procfs.loadavg()
        rss_warm = procfs.rss_kib(proxy.pids())
        n_low = n // 5
        t0 = time.time()
        deadline = t0 + IDLE_FILL_DEADLINE
        idle_fill(proxy.port, conns, n_low, paths, deadline)
        t_low = time.time() - t0
        time.sleep(IDLE_SETTLE)
        pids = proxy.pids()
        rss_low = procfs.rss_kib(pids)
        fds_low = procfs.open_fds(pids)
        t1 = time.time()
        idle_fill(proxy.port, conns, n, paths, deadline)
        open_s = t_low + time.time() - t1
        time.sleep(IDLE_SETTLE)
        pids = proxy.pids()
        rss_high = procfs.rss_kib(pids)
        fill_wall = time.time() - t0
        fds = procfs.open_fds(pids)
        closed = idle_closed_count(conns)
        if closed:
            raise RuntimeError(f"{cls.name}: {closed} of {n} idle connections were closed or "
                               f"readable at the N reading")
        r = {"n_low": n_low, "n": n, "rss_warm_kib": rss_warm, "rss_low_kib": rss_low,
             "rss_kib": rss_high,
             "bytes_per_conn": (rss_high - rss_low) * 1024 / (n - n_low),
             "open_s": open_s, "fill_wall_s": fill_wall, "loadavg": la, "open_fds_low": fds_low, "open_fds": fds,
             "nofile": {str(p): procfs.max_open_files(p) for p in pids}}
    finally:
        for c in conns:
            c.close()
        proxy.stop()
    r["wall_s"] = time.time() - t_start
    return r


def raise_client_nofile(n):
    """Raises this process's open-file limit for n client connections; returns the old limits."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, hard = old
    want = n + 1000
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE,
                               (want, hard if hard == resource.RLIM_INFINITY else max(hard, want)))
        except (ValueError, OSError):
            if hard != resource.RLIM_INFINITY and hard < n + 100:
                raise RuntimeError(f"--idle {n}: open-file hard limit {hard} is too low for the client "
                                   f"(raise it, e.g. ulimit -Hn {want}, or run as root)")
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return old


def idle_pass(ctx):
    """Memory per idle keep-alive client connection, for each proxy, alternating over reps.
    The client is this process, pinned to the client core for the pass."""
    opts = ctx.opts
    n = opts.idle
    if n < 10:
        raise RuntimeError("--idle must be at least 10")
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    if n + 2000 > hi - lo:
        raise RuntimeError(f"--idle {n}: only {hi - lo} local ports (ip_local_port_range)")
    old_limits = raise_client_nofile(n)
    old_affinity = os.sched_getaffinity(0)
    client_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    runs = defaultdict(list)
    t0 = time.time()
    pass_deadline = t0 + opts.reps * 3 * (IDLE_FILL_DEADLINE + 60)
    b = TestBackends(ctx, opts.backends)
    try:
        os.sched_setaffinity(0, {int(CLIENT_CORE)})
        for rep in range(opts.reps):
            for cls in (Rondel, HAProxy, Nginx):
                if time.time() > pass_deadline:
                    raise RuntimeError("idle pass: over its time bound")
                r = idle_run(ctx, cls, b, n)
                runs[cls.name].append(r)
                log(f"  idle rep {rep + 1} {cls.name:8} {r['bytes_per_conn']:7.0f} B/conn  RSS "
                    f"{r['rss_warm_kib'] / 1024:.1f} (warm) / {r['rss_low_kib'] / 1024:.1f} ({r['n_low']}) / "
                    f"{r['rss_kib'] / 1024:.1f} MiB ({n})  fds {r['open_fds']}  open {r['open_s']:.1f}s wall {r['wall_s']:.1f}s "
                    f"load {r['loadavg']}")
    finally:
        os.sched_setaffinity(0, old_affinity)
        b.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, old_limits)
    return {"n": n, "n_low": n // 5, "reps": opts.reps, "batch": IDLE_BATCH, "backends": opts.backends,
            "client_nofile": client_nofile, "pass_s": time.time() - t0, "runs": dict(runs)}


def idle_section(idle):
    n, n_low = idle["n"], idle["n_low"]
    runs = idle["runs"]
    h = med([r["bytes_per_conn"] for r in runs.get("haproxy", [])])
    out = ["## Idle keep-alive connections", "",
           f"{n:,} client connections held open, each after one `GET /obj/<i>` and its complete 200 "
           f"response (opened in batches of {idle['batch']}), through each proxy in turn with "
           f"{idle['backends']} test backends, {idle['reps']} reps alternating. Bytes per idle connection = "
           f"(RSS at {n:,} − RSS at {n_low:,}) / {n - n_low:,}, RSS = VmRSS of the proxy's processes "
           f"(nginx: master + worker), read {IDLE_SETTLE} s after the last response; after a warm-up of "
           f"400 requests on 8 connections. Medians, (min–max) over reps; ratio to HAProxy's median "
           f"(lower is better).", "",
           f"| proxy | bytes per idle connection | RSS at {n_low:,} MiB | RSS at {n:,} MiB | "
           f"time to open {n:,} s | ÷ HAProxy |",
           "|---|---|---|---|---|---|"]
    for name, rs in runs.items():
        b = [r["bytes_per_conn"] for r in rs]
        out.append("| " + " | ".join([
            name,
            fmt_range(b, lambda x: f"{x:,.0f}"),
            fmt_range([r["rss_low_kib"] / 1024 for r in rs], lambda x: f"{x:.1f}"),
            fmt_range([r["rss_kib"] / 1024 for r in rs], lambda x: f"{x:.1f}"),
            fmt_range([r["open_s"] for r in rs], lambda x: f"{x:.1f}"),
            ratio(med(b), h),
        ]) + " |")
    out.append("")
    out.append(_idle_notes(idle))
    return "\n".join(out) + "\n"


def _idle_notes(idle):
    n, n_low, runs = idle["n"], idle["n_low"], idle["runs"]
    return ("RSS after the warm-up (MiB): " + "; ".join(
        f"{name} " + ", ".join(f"{r['rss_warm_kib'] / 1024:.1f}" for r in rs) for name, rs in runs.items())
        + f". Open fds of the proxy at {n_low:,} → {n:,}: " + "; ".join(
        f"{name} " + ", ".join(f"{r['open_fds_low']} → {r['open_fds']}" for r in rs) for name, rs in runs.items())
        + ". Open-file limits (soft, per process): " + "; ".join(
        f"{name} " + "/".join(str(v) for v in rs[0]["nofile"].values()) for name, rs in runs.items())
        + f"; client {idle['client_nofile']}. Load average at the start of each run: " + "; ".join(
        f"{name} " + ", ".join(r["loadavg"].split()[0] for r in rs) for name, rs in runs.items())
        + f". Pass wall time {idle['pass_s']:.0f} s.")
