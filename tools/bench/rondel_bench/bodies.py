"""The large-body pass: rondel, HAProxy (default and `option splice-auto`) and nginx (proxy
buffering on and off) in front of static nginx backends that send files with sendfile(2), on
bodies of 32 B, 16 KiB, 256 KiB and 4 MiB, a mixed size distribution and 100 concurrent 4 MiB
transfers; req/s, proxy CPU per request and per GiB, p99, peak RSS; and its report section with
the ratios the large-object issue sets as targets."""

import os
import signal
import subprocess
from collections import defaultdict

from rondel_support import httpio, ports, procfs

from .backends import NGINX_BACKENDS_CONF
from .context import BENCH_DIR, CLIENT_CORE, log
from .load import measured_run
from .proxies import (HAProxy, HAProxySplice, Nginx, NginxUnbuffered, NoProxy, Rondel,
                      RondelBaseline)
from .report import fmt_range, med, ratio

BODIES_LUA = os.path.join(BENCH_DIR, "bodies.lua")
GIB = 1 << 30

# Object names the static backends serve (/NAME/obj/I -> NAME.bin) and their sizes.
SIZES = {"32b": 32, "16k": 16 << 10, "256k": 256 << 10, "4m": 4 << 20}

# (key for --bodies-workloads, workload, BENCH_SIZES for bodies.lua, connections (None:
# --conns), pause in ms after each response (None: closed loop)). The mixed one sends most
# requests small and most bytes large: 60% 32 B, 30% 16 KiB, 8% 256 KiB, 2% 4 MiB requests,
# of which 4 MiB objects carry about 76% of the bytes. "256 KiB, paced" is the 256 KiB load with
# every connection waiting PACED_DELAY_MS after each response (bodies.lua's delay(), as the
# latency pass does), which caps the rate at about conns / (10 ms + latency), below what any
# proxy or the client core serves closed-loop: the proxies' p99s are then compared at about the
# same offered load and with neither core saturated (closed-loop, core 1, where wrk and the
# backends run, is).
PACED_DELAY_MS = 10
WORKLOADS = (
    ("32b", "32 B", "32b:1", None, None),
    ("16k", "16 KiB", "16k:1", None, None),
    ("256k", "256 KiB", "256k:1", None, None),
    ("256k-paced", "256 KiB, paced", "256k:1", None, PACED_DELAY_MS),
    ("4m", "4 MiB", "4m:1", None, None),
    ("mixed", "mixed", "32b:60,16k:30,256k:8,4m:2", None, None),
    ("4m-100", "4 MiB × 100 conns", "4m:1", 100, None),
)
WORKLOAD_KEYS = tuple(w[0] for w in WORKLOADS)


def selected_workloads(opts):
    """WORKLOADS, or the ones --bodies-workloads names (comma-separated keys)."""
    keys = getattr(opts, "bodies_workloads", None)
    if not keys:
        return WORKLOADS
    want = set(keys.split(","))
    return tuple(w for w in WORKLOADS if w[0] in want)


# rondel moves a body through pooled buffers: at most one read buffer and one pending write per
# side of an exchange, 16 KiB each except the backend side's while a response body larger than
# 16 KiB streams on the copy path (a 64 KiB read buffer, and on a TLS listener up to one 64 KiB
# record batch of ciphertext pending to the client), so 2 × 16 + 2 × 64 KiB per transfer in
# flight, none when idle. A spliced body holds none of the backend side's; its pipe (up to
# 1 MiB) is kernel memory, not in the RSS.
RONDEL_BYTES_PER_TRANSFER = (2 * 16 + 2 * 64) * 1024

# sendfile without tcp_nopush: with TCP_CORK on loopback wrk straight at one server got 7,541
# req/s of 256 KiB (91k of 32 B) on the client core, without it 16,099 (101k), so with it the
# backends, not the proxies, bounded every large-body figure (docs/benchmarks.md).
STATIC_SERVER = """
    server {{
        listen 127.0.0.1:{port};
        access_log off;
        keepalive_requests 100000000;
        sendfile on;
        etag off;
        root {objects};
        location / {{ rewrite ^/([a-z0-9]+)/ /$1.bin break; }}
    }}"""


class StaticBackends:
    """One nginx process (1 worker) with `n` static servers that send SIZES' files with
    sendfile(2) (from the page cache: the file is the same for every path of a size), so a
    body costs the backend no user-space copy. Same interface as backends.NginxBackends."""
    kind = "nginx-static"

    def __init__(self, ctx, n, core=CLIENT_CORE):
        self.ctx = ctx
        self.names = [f"b{i + 1}" for i in range(n)]
        d = os.path.join(ctx.workdir, "static-backends")
        objects = os.path.join(d, "objects")
        os.makedirs(objects, exist_ok=True)
        # nginx's worker runs as nobody when started as root: it must reach and read the files.
        for path in (ctx.workdir, d):
            os.chmod(path, 0o711)
        os.chmod(objects, 0o755)
        for name, size in SIZES.items():
            path = os.path.join(objects, f"{name}.bin")
            with open(path, "wb") as f:
                f.write(os.urandom(size))
            os.chmod(path, 0o644)
        held = [ports.HeldListener() for _ in self.names]
        self.ports = [h.port for h in held]
        servers = "".join(STATIC_SERVER.format(port=p, objects=objects) for p in self.ports)
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(NGINX_BACKENDS_CONF.format(d=d, servers=servers))
        try:
            self.proc = ctx.registry.popen(
                ctx.prefix(core) + ["nginx", "-p", d, "-e", f"{d}/error.log", "-c", path],
                env=ports.nginx_inherit_env(held), pass_fds=[h.fd for h in held],
                stdout=subprocess.DEVNULL)
        finally:
            for h in held:
                h.close()
        for port in self.ports:
            httpio.wait_http(port, alive=lambda: self.proc.poll() is None, path="/32b/obj/1")
            for name, size in SIZES.items():
                status, _, body = httpio.http_get(port, f"/{name}/obj/1")
                if status != 200 or len(body) != size:
                    raise RuntimeError(f"static backend {port}: /{name}/obj/1 answered {status} "
                                       f"with {len(body)} bytes, want 200 with {size}; see {d}")

    def pids(self):
        return procfs.proc_tree(self.proc.pid)

    def stop(self):
        self.ctx.registry.stop(self.proc, signal.SIGQUIT)


def proxy_kinds(ctx):
    """The proxy classes of the pass, in the order of the first rep; rondel-base only when
    --bodies-baseline names a binary."""
    kinds = [Rondel, HAProxy, HAProxySplice, Nginx, NginxUnbuffered]
    if ctx.opts.bodies_baseline:
        RondelBaseline.baseline_bin = ctx.opts.bodies_baseline
        kinds.insert(1, RondelBaseline)
    return kinds


def _add_body_figures(r, rss_start_kib):
    """Adds CPU per GiB and RSS growth to a measured_run result (proxies only)."""
    r["gib"] = r["bytes"] / GIB
    if "cpu_us_per_req" in r:
        cpu_s = r["cpu_us_per_req"] * r["requests"] / 1e6
        r["cpu_ms_per_gib"] = cpu_s * 1e3 / r["gib"] if r["gib"] else float("nan")
        r["rss_start_kib"] = rss_start_kib
        r["rss_growth_kib"] = r["rss_kib"] - rss_start_kib


def bodies_pass(ctx, make_backends=None):
    """{workload: {proxy: [results]}}. For each rep and workload, every proxy is started fresh
    (so its peak RSS is that workload's) and measured in turn, the order rotated each rep so
    drift and position hit all alike; wrk straight at a backend ("none") is the ceiling."""
    opts = ctx.opts
    results = defaultdict(lambda: defaultdict(list))
    b = StaticBackends(ctx, opts.backends)
    try:
        kinds = proxy_kinds(ctx)
        for rep in range(opts.reps):
            order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]
            for _, wl, sizes, conns, delay_ms in selected_workloads(opts):
                proxies = []
                try:
                    for kind in order:
                        proxies.append(kind(ctx, b))
                    start_rss = {p.name: procfs.rss_kib(p.pids()) for p in proxies}
                    for p in proxies + [NoProxy(b)]:
                        r = measured_run(ctx, p, 0, opts.duration, seed=rep + 1,
                                         backend_pids=b.pids(), conns=conns or opts.conns,
                                         delay_ms=delay_ms, lua=BODIES_LUA,
                                         lua_env={"BENCH_SIZES": sizes,
                                                  "BENCH_PATHS": str(opts.paths)})
                        _add_body_figures(r, start_rss.get(p.name, 0))
                        results[wl][p.name].append(r)
                        log(_run_line(rep, wl, p.name, r))
                finally:
                    for p in proxies:
                        p.stop()
    finally:
        b.stop()
    return {wl: dict(v) for wl, v in results.items()}


def _run_line(rep, wl, name, r):
    cpu = (f" cpu {r['cpu_us_per_req']:.1f} us/req {r['cpu_ms_per_gib']:.0f} ms/GiB "
           f"rss {r['rss_kib'] / 1024:.1f} MiB" if "cpu_us_per_req" in r else "")
    return (f"  bodies rep {rep + 1} {wl:18} {name:14} {r['rps']:>9,.0f} req/s "
            f"{r['gib'] / (r['duration_us'] / 1e6):.2f} GiB/s p99 {r['p99_us'] / 1000:.2f} ms "
            f"errors {r['errors']}{cpu}")


TABLE_HEAD = (
    "| workload | proxy | req/s | GiB/s | p99 ms | errors | proxy CPU µs/req | proxy CPU ms/GiB "
    "| proxy busy | core 1 busy | backends µs/req | peak RSS MiB | RSS growth KiB/conn "
    "| req/s ÷ HAProxy | CPU/req ÷ HAProxy | CPU/GiB ÷ HAProxy | CPU/GiB ÷ splice-auto "
    "| p99 ÷ HAProxy |",
    "|" + "---|" * 18)


def _med(runs, key):
    return med([r[key] for r in runs])


def _row(wl, name, runs, by_proxy, conns):
    h = by_proxy.get("haproxy", [])
    hs = by_proxy.get("haproxy-splice", [])
    has_cpu = "cpu_us_per_req" in runs[0]

    m = _med

    def rng(k, f):
        return fmt_range([r[k] for r in runs], f) if has_cpu or k not in CPU_KEYS else "n/a"
    return "| " + " | ".join([
        wl, name,
        rng("rps", lambda x: f"{x:,.0f}"),
        fmt_range([r["gib"] / (r["duration_us"] / 1e6) for r in runs], lambda x: f"{x:.2f}"),
        rng("p99_us", lambda x: f"{x / 1000:.2f}"),
        str(sum(r["errors"] for r in runs)),
        rng("cpu_us_per_req", lambda x: f"{x:.1f}"),
        rng("cpu_ms_per_gib", lambda x: f"{x:.0f}"),
        rng("cpu_busy", lambda x: f"{x * 100:.0f}%"),
        f"{m(runs, 'core1_busy') * 100:.0f}%",
        f"{m(runs, 'backends_us_per_req'):.1f}",
        f"{max(r['rss_kib'] for r in runs) / 1024:.1f}" if has_cpu else "n/a",
        f"{m(runs, 'rss_growth_kib') / conns:.1f}" if has_cpu else "n/a",
        ratio(m(runs, "rps"), m(h, "rps")) if h else "n/a",
        ratio(m(runs, "cpu_us_per_req"), m(h, "cpu_us_per_req")) if has_cpu and h else "n/a",
        ratio(m(runs, "cpu_ms_per_gib"), m(h, "cpu_ms_per_gib")) if has_cpu and h else "n/a",
        ratio(m(runs, "cpu_ms_per_gib"), m(hs, "cpu_ms_per_gib")) if has_cpu and hs else "n/a",
        ratio(m(runs, "p99_us"), m(h, "p99_us")) if h else "n/a",
    ]) + " |"


CPU_KEYS = ("cpu_us_per_req", "cpu_ms_per_gib", "cpu_busy")

# The targets for rondel, as (workload, what, figure, compared with, limit, higher is
# better): checked in the report against the medians of the same run.
TARGETS = (
    ("256 KiB", "req/s ≥ 1.2 × HAProxy", "rps", "haproxy", 1.2, True),
    ("256 KiB", "CPU/req ≤ 0.6 × HAProxy", "cpu_us_per_req", "haproxy", 0.6, False),
    ("256 KiB", "p99 ≤ HAProxy's", "p99_us", "haproxy", 1.0, False),
    ("4 MiB", "CPU/GiB ≤ 0.5 × HAProxy", "cpu_ms_per_gib", "haproxy", 0.5, False),
    ("4 MiB", "CPU/GiB ≤ HAProxy splice-auto", "cpu_ms_per_gib", "haproxy-splice", 1.0, False),
    ("32 B", "req/s ≥ 0.94 × rondel-base (no regression)", "rps", "rondel-base", 0.94, True),
)


def target_lines(results):
    out = ["| target | rondel ÷ anchor | met |", "|---|---|---|"]
    for wl, what, key, anchor, limit, higher in TARGETS:
        if wl not in results:
            out.append(f"| {wl}: {what} | n/a (workload not in this run) | n/a |")
            continue
        runs, ref = results[wl].get("rondel"), results[wl].get(anchor)
        if not runs or not ref:
            out.append(f"| {wl}: {what} | n/a (no {anchor} in this run) | n/a |")
            continue
        x = med([r[key] for r in runs]) / med([r[key] for r in ref])
        met = x >= limit if higher else x <= limit
        out.append(f"| {wl}: {what} | {x:.2f} | {'yes' if met else 'no'} |")
    return out


def bodies_section(results, args):
    budget = RONDEL_BYTES_PER_TRANSFER // 1024
    out = ["## Large bodies", "",
           f"Static nginx backends ({args.backends} servers, 1 worker, sendfile) on core "
           f"{CLIENT_CORE} with wrk -t1 (tools/bench/bodies.lua), each proxy alone on core 0 "
           f"with one worker/thread; {args.conns} connections unless the workload says; "
           f"{args.duration}s × {args.reps} reps, every proxy started fresh for each workload "
           "and measured in turn, the order rotated each rep. GiB counts what wrk received "
           "(heads included). Proxy CPU is its process tree's user + system time. Peak RSS is "
           "VmHWM over the warm-up and the run; RSS growth per connection is (peak − RSS at "
           f"start) ÷ connections: rondel's budget is {budget} KiB per transfer in flight "
           "(2 × 16 + 2 × 64 KiB pooled buffers on the copy path; a spliced body's pipe, up "
           "to 1 MiB, is kernel memory "
           "outside the RSS). Medians, (min–max) over reps; ratios to the medians "
           "of the same run. \"none\" is wrk straight at one backend: the ceiling of the client "
           "core. \"256 KiB, paced\": every connection waits "
           f"{PACED_DELAY_MS} ms after each response, which caps every proxy at about the same "
           "offered load, below its capacity and the client core's.", ""]
    out += TABLE_HEAD
    for _, wl, sizes, conns, _ in WORKLOADS:
        by_proxy = results.get(wl)
        if not by_proxy:
            continue
        out += [_row(wl, name, runs, by_proxy, conns or args.conns)
                for name, runs in by_proxy.items()]
    out += ["", "Targets (issue: large objects), rondel against the anchor in this run:", ""]
    out += target_lines(results)
    out += paced_lines(results)
    return "\n".join(out) + "\n"


def paced_lines(results):
    """rondel's and HAProxy's p99 in the paced workload (not an issue target: the closed-loop
    p99 with neither core saturated)."""
    runs, ref = (results.get("256 KiB, paced", {}).get(k) for k in ("rondel", "haproxy"))
    if not runs or not ref:
        return []
    return ["", f"Paced, at about the same offered load (256 KiB, paced; not an issue target): "
                f"rondel {_med(runs, 'rps'):,.0f} req/s against HAProxy's {_med(ref, 'rps'):,.0f}, "
                f"p99 {_med(runs, 'p99_us') / 1000:.2f} against {_med(ref, 'p99_us') / 1000:.2f} ms "
                f"({_med(runs, 'p99_us') / _med(ref, 'p99_us'):.2f} ×)."]
