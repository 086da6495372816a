#!/usr/bin/env python3
"""Side-by-side benchmark: rondel vs HAProxy vs nginx vs no proxy (see docs/benchmarks.md).

Started by tools/bench/run.sh, which installs the tools and builds rondel first. Everything
listens on 127.0.0.1; every process this script starts is stopped by pid at the end.
"""
import argparse
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_DIR = os.path.join(ROOT, "tools", "bench")
LUA = os.path.join(BENCH_DIR, "load.lua")
PROXY_CORE = "0"
CLIENT_CORE = "1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NICE = []  # ["nice", "-n", N] when --nice is given: applied to proxies, backends and wrk alike

PORT_TO_NAME = {}  # "127.0.0.1:PORT" -> backend name, for rondel's backend ids
STARTED = []  # Popen objects started by this script (stopped by pid at exit)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


# ["chrt", "-b", "0"] during the SCHED_BATCH pass: put before every command pinned to CLIENT_CORE
# (wrk and the backends), never before a proxy's.
CLIENT_SCHED = []


def pin(core):
    """Command prefix that pins to `core` (a taskset CPU list); none when core is None
    (unpinned: the process may run on any core, as in the workers pass)."""
    if core is None:
        return []
    return (CLIENT_SCHED if core == CLIENT_CORE else []) + ["taskset", "-c", core]


def start(argv, core, **kw):
    p = subprocess.Popen(NICE + pin(core) + argv, **kw)
    STARTED.append(p)
    return p


def stop(p, sig=signal.SIGTERM, timeout=5.0):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    if p in STARTED:
        STARTED.remove(p)


def stop_all():
    for p in list(reversed(STARTED)):
        stop(p)


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def proc_tree(pid):
    pids = [pid]
    for c in children(pid):
        pids += proc_tree(c)
    return pids


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)
    return total


def core_busy_ticks(core):
    """Non-idle ticks of one CPU from /proc/stat (user+nice+system+irq+softirq+steal); of all
    CPUs together (the aggregate "cpu" line) when core is None."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{'' if core is None else core} "):
                v = [int(x) for x in line.split()[1:]]
                return sum(v[:8]) - v[3] - v[4]
    return 0


def status_field(path, field):
    """One numeric field of a /proc status file (e.g. "VmRSS", in KiB); 0 when absent."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def status_sum(pids, field):
    """Sum over pids of one numeric field of /proc/PID/status."""
    return sum(status_field(f"/proc/{pid}/status", field) for pid in pids)


def task_status_sum(pids, field):
    """Like status_sum, over every thread of each pid (/proc/PID/task/TID/status): context-switch
    counts in /proc/PID/status are the main thread's only."""
    return sum(status_field(f"/proc/{pid}/task/{tid}/status", field)
               for pid in pids for tid in os.listdir(f"/proc/{pid}/task"))


def nonvoluntary_switches(pids):
    return task_status_sum(pids, "nonvoluntary_ctxt_switches")


def voluntary_switches(pids):
    """Times pids blocked (e.g. in epoll_wait with nothing ready) and were woken again."""
    return task_status_sum(pids, "voluntary_ctxt_switches")


def ipi_counts():
    """Inter-processor interrupts received so far, per CPU: {"RES0": n, "CAL0": n, ...}.
    RES (rescheduling) and CAL (function call) are what a CPU sends another to wake a task there;
    in a virtual machine each one usually costs an exit to the hypervisor."""
    out = {}
    with open("/proc/interrupts") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in ("RES:", "CAL:"):
                for cpu, v in enumerate(fields[1:1 + os.cpu_count()]):
                    out[f"{fields[0][:3]}{cpu}"] = int(v)
    return out


def machine_switches():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return 0


def vm_hwm_kib(pids):
    return status_sum(pids, "VmHWM")


def vm_rss_kib(pids):
    """Current resident set (VmRSS) summed over pids, KiB."""
    return status_sum(pids, "VmRSS")


def open_fds(pids):
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)


def max_open_files(pid):
    """Soft RLIMIT_NOFILE of a running process, from /proc/PID/limits."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                v = line.split()[3]
                return -1 if v == "unlimited" else int(v)
    return 0


# ---------------------------------------------------------------- backends


# nginx 1.22 with `hash $request_uri consistent`, one worker, keep-alive to the backends.
# The idle-connection pass raises worker_connections and adds worker_rlimit_nofile; with the
# defaults the text is the throughput configuration documented in docs/benchmarks.md.
def nginx_conf(port, ports, d, worker_connections=4096, rlimit_nofile=None):
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in ports)
    rlimit = f"worker_rlimit_nofile {rlimit_nofile};\n" if rlimit_nofile else ""
    return f"""worker_processes 1;
{rlimit}daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections {worker_connections}; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream up {{
        hash $request_uri consistent;
{servers}
        keepalive 64;
        keepalive_requests 100000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        keepalive_requests 100000000;
        location / {{
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""

class TestBackends:
    """rondel-test-backend: one process serving every backend on one event loop (`--and`), as
    the nginx backends do, or (each=True) one process per backend."""

    def __init__(self, binary, n, workdir, ledger=False, core=CLIENT_CORE, each=False):
        self.kind = "test-each" if each else "test"
        self.names = [f"b{i + 1}" for i in range(n)]
        self.ports = []
        self.procs = []
        self.ledgers = {}
        groups = []
        for name in self.names:
            argv = ["--listen", "127.0.0.1:0", "--name", name]
            if ledger:
                path = os.path.join(workdir, f"ledger-{name}.txt")
                if os.path.exists(path):
                    os.unlink(path)
                self.ledgers[name] = path
                argv += ["--ledger", path]
            groups.append(argv)
        if not each:  # one process: the groups joined by --and
            joined = []
            for g in groups:
                joined += (["--and"] if joined else []) + g
            groups = [joined]
        for group in groups:
            p = start([binary] + group, core, stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
            for _ in range(group.count("--and") + 1):
                line = p.stdout.readline().split()
                if len(line) != 2 or line[0] != "listening":
                    raise RuntimeError(f"test backend did not start: {line}")
                self.ports.append(int(line[1].rsplit(":", 1)[1]))
        for name, port in zip(self.names, self.ports):
            PORT_TO_NAME[f"127.0.0.1:{port}"] = name
        for port in self.ports:
            wait_port(port)

    def pids(self):
        return [p.pid for p in self.procs]

    def per_path_counts(self):
        """{backend name: Counter(path -> requests)} from the ledgers."""
        out = {}
        for name, path in self.ledgers.items():
            c = Counter()
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3:
                        c[parts[2]] += 1
            out[name] = c
        return out

    def truncate_ledgers(self):
        for path in self.ledgers.values():
            os.truncate(path, 0)

    def stop(self):
        for p in self.procs:
            stop(p)


class NginxBackends:
    """One nginx process (1 worker) with one `return 200` server per backend."""
    kind = "nginx"

    def __init__(self, n, workdir, ledger=False, core=CLIENT_CORE):
        self.names = [f"b{i + 1}" for i in range(n)]
        self.ports = [free_port() for _ in self.names]
        for name, port in zip(self.names, self.ports):
            PORT_TO_NAME[f"127.0.0.1:{port}"] = name
        self.ledgers = {}
        d = os.path.join(workdir, "nginx-backends")
        os.makedirs(d, exist_ok=True)
        servers = []
        for name, port in zip(self.names, self.ports):
            if ledger:
                path = os.path.join(workdir, f"ledger-{name}.txt")
                if os.path.exists(path):
                    os.unlink(path)
                self.ledgers[name] = path
                alog = f"access_log {path} ledger;"
            else:
                alog = "access_log off;"
            servers.append(f"""
    server {{
        listen 127.0.0.1:{port} reuseport;
        {alog}
        keepalive_requests 100000000;
        location / {{ add_header X-Backend {name}; return 200 "{name}\\n"; }}
    }}""")
        conf = f"""
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    default_type text/plain;
    log_format ledger '- $request_method $request_uri 0';
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    {"".join(servers)}
}}
"""
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = start(["nginx", "-p", d, "-e", f"{d}/error.log", "-c", path], core)
        for port in self.ports:
            wait_port(port)

    def pids(self):
        return proc_tree(self.proc.pid)

    per_path_counts = TestBackends.per_path_counts
    truncate_ledgers = TestBackends.truncate_ledgers

    def stop(self):
        stop(self.proc, signal.SIGQUIT)


# ---------------------------------------------------------------- proxies

class Proxy:
    name = "?"

    def __init__(self, workdir, backends, bounded=True, admin=False, idle=0, workers=1,
                 core=PROXY_CORE):
        # idle > 0: the idle-connection pass, which holds `idle` client connections open; each
        # proxy's connection and fd limits are raised for it (and only for it).
        # workers: rondel's `workers`, HAProxy's `nbthread` (> 1 only in the workers pass, which
        # also starts the proxy unpinned: core None).
        self.idle = idle
        self.workers = workers
        self.port = free_port()
        self.dir = os.path.join(workdir, f"{self.name}-{'b' if bounded else 'u'}"
                                + (f"-w{workers}" if workers != 1 else ""))
        os.makedirs(self.dir, exist_ok=True)
        self.admin_port = free_port() if admin else None
        self.proc = start(self.argv(backends, bounded), core,
                          stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(self.dir, "stderr.txt"), "w"))
        wait_port(self.port)
        time.sleep(0.2)
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited; see {self.dir}/stderr.txt")

    def pids(self):
        return proc_tree(self.proc.pid)

    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def write(self, fname, text):
        path = os.path.join(self.dir, fname)
        with open(path, "w") as f:
            f.write(text)
        return path

    def stop(self):
        stop(self.proc)


class Rondel(Proxy):
    name = "rondel"
    binary = None

    def argv(self, backends, bounded):
        lines = [
            f"workers: {self.workers}",
            "drain_timeout: 1s",
            'log: {access_log: "", level: warn}',
            f"listeners: [{{name: web, bind: 127.0.0.1:{self.port}, pool: p{self.idle_max_connections()}}}]",
            "pools:",
            "  - name: p",
            "    algorithm: ring",
            "    hash_key: uri",
            f"    balance_factor: {125 if bounded else 0}",
            "    backends:",
        ]
        lines += [f"      - {{address: 127.0.0.1:{port}}}" for port in backends.ports]
        if self.admin_port:
            lines.append(f"admin: {{bind: 127.0.0.1:{self.admin_port}}}")
        argv = [self.binary, "-f", self.write("rondel.yaml", "\n".join(lines) + "\n")]
        if self.idle:
            # prlimit execs rondel, so the pid stays rondel's.
            argv = ["prlimit", f"--nofile={self.idle + 1000}", "--"] + argv
        return argv

    DEFAULT_MAX_CONNECTIONS = 10000  # the listener's default (docs/configuration.md)

    def idle_max_connections(self):
        if self.idle and self.idle + 100 > self.DEFAULT_MAX_CONNECTIONS:
            return f", max_connections: {self.idle + 100}"
        return ""


def haproxy_conf(port, servers, balance, factor=None, nbthread=1, maxconn="4096"):
    """The HAProxy configuration of bench.py and routing_bench.py: keep-alive on both sides,
    `http-reuse always`, consistent hashing with `balance`. servers: (name, port) pairs;
    factor: the hash-balance-factor line (None: unbounded, no line)."""
    lines = "\n".join(f"    server {n} 127.0.0.1:{p}" for n, p in servers)
    bound = f"    hash-balance-factor {factor}" if factor is not None else ""
    return f"""global
    nbthread {nbthread}
    maxconn {maxconn}

defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 60s

frontend fe
    bind 127.0.0.1:{port}
    default_backend be

backend be
    balance {balance}
    hash-type consistent
{bound}
{lines}
"""


class HAProxy(Proxy):
    name = "haproxy"

    def argv(self, backends, bounded):
        servers = "\n".join(f"    server {n} 127.0.0.1:{p}" for n, p in zip(backends.names, backends.ports))
        # HAProxy sets its own RLIMIT_NOFILE from maxconn: maxsock = 2 x maxconn + a few (a
        # server-side fd per client connection). Only the idle pass needs maxconn > 4096; there
        # 2 x (N + 100) can exceed the hard limit (20000 on the build machine), which HAProxy
        # cannot raise without CAP_SYS_RESOURCE, and strict-limits (on by default since 2.3)
        # would make it exit. "no strict-limits" makes it warn and run with the hard limit:
        # idle client connections hold no server connection, so N + a few hundred fds suffice.
        maxconn = f"{max(4096, self.idle + 100)}\n    no strict-limits" if self.idle else "4096"
        conf = haproxy_conf(self.port, zip(backends.names, backends.ports), "uri",
                            factor=125 if bounded else None, nbthread=self.workers, maxconn=maxconn)
        return ["haproxy", "-db", "-f", self.write("haproxy.cfg", conf)]


class Nginx(Proxy):
    name = "nginx"

    def argv(self, backends, bounded):
        d = self.dir
        if self.idle:
            wc = max(4096, self.idle + 1000)
            conf = nginx_conf(self.port, backends.ports, d, worker_connections=wc, rlimit_nofile=wc + 1000)
        else:
            conf = nginx_conf(self.port, backends.ports, d)
        return ["nginx", "-p", d, "-e", f"{d}/error.log", "-c", self.write("nginx.conf", conf)]

    def stop(self):
        stop(self.proc, signal.SIGQUIT)


class NoProxy:
    """wrk straight at the first backend: the ceiling of the client core."""
    name = "none"

    def __init__(self, backends):
        self.port = backends.ports[0]

    def pids(self):
        return []

    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def stop(self):
        pass


# ---------------------------------------------------------------- load

def run_wrk(url, duration, args, zipf, mode="random", seed=1, conns=None, core=CLIENT_CORE,
            delay_ms=None):
    """delay_ms: each connection waits that long after a response before its next request
    (load.lua's delay(); wrk's latency does not include the wait), which caps the request rate
    at about conns / (delay + latency) whatever the target."""
    env = dict(os.environ, BENCH_PATHS=str(args.paths), BENCH_ZIPF=str(zipf),
               BENCH_MODE=mode, BENCH_SEED=str(seed))
    if delay_ms:
        env["BENCH_DELAY_MS"] = str(delay_ms)
    argv = NICE + pin(core) + ["wrk", "-t1", f"-c{conns or args.conns}",
            f"-d{duration}s", "--timeout", "2s", "-s", LUA, url]
    out = subprocess.run(argv, env=env, capture_output=True, text=True,
                         timeout=duration + 30)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return json.loads(line[len("BENCH_RESULT "):])
    raise RuntimeError(f"wrk gave no result: {out.stdout}\n{out.stderr}")


def measured_run(target, args, zipf, duration, seed, pinned=True, backend_pids=(), conns=None,
                 delay_ms=None):
    """One warm-up, then one measured wrk run with the target's CPU time around it.
    pinned: wrk on CLIENT_CORE; busy time of PROXY_CORE and CLIENT_CORE (core0_*, core1_*), and
    what the client core spends per request: the backends' CPU (backend_pids) and the rest (wrk,
    interrupts), with the wake-up IPIs each core received.
    Unpinned (the workers pass): wrk on any core; busy time of the whole machine instead
    (machine_busy: share of all cores; machine_us_per_req)."""
    wrk_core = CLIENT_CORE if pinned else None
    cores = (PROXY_CORE, CLIENT_CORE) if pinned else (None,)
    run_wrk(target.url(), 1, args, zipf, seed=seed + 1000, core=wrk_core, conns=conns, delay_ms=delay_ms)
    la = loadavg()
    pids = target.pids()
    t0 = cpu_ticks(pids) if pids else 0
    n0 = nonvoluntary_switches(pids) if pids else 0
    b0 = [core_busy_ticks(c) for c in cores]
    bk0 = cpu_ticks(backend_pids)
    i0 = ipi_counts()
    w0 = time.time()
    r = run_wrk(target.url(), duration, args, zipf, seed=seed, core=wrk_core, conns=conns,
                delay_ms=delay_ms)
    wall = time.time() - w0
    i1 = ipi_counts()
    bk1 = cpu_ticks(backend_pids)
    t1 = cpu_ticks(pids) if pids else 0
    n1 = nonvoluntary_switches(pids) if pids else 0
    busy_s = [(y - x) / CLK_TCK for x, y in zip(b0, [core_busy_ticks(c) for c in cores])]
    if pinned:
        r["core0_busy"] = busy_s[0] / wall
        r["core1_busy"] = busy_s[1] / wall
        r["core0_us_per_req"] = busy_s[0] * 1e6 / max(1, r["requests"])
        r["core1_us_per_req"] = busy_s[1] * 1e6 / max(1, r["requests"])
        r["backends_us_per_req"] = (bk1 - bk0) / CLK_TCK * 1e6 / max(1, r["requests"])
        for k in i0:  # IPIs received per 1,000 requests, e.g. "RES1": to the client core
            r[f"ipi_{k}_per_1k"] = (i1[k] - i0[k]) * 1000 / max(1, r["requests"])
    else:
        r["machine_busy"] = busy_s[0] / wall / os.cpu_count()
        r["machine_us_per_req"] = busy_s[0] * 1e6 / max(1, r["requests"])
    r["loadavg"] = la
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    r["errors"] = sum(r[k] for k in ("err_connect", "err_read", "err_write", "err_status", "err_timeout"))
    if pids:
        cpu_s = (t1 - t0) / CLK_TCK
        r["cpu_us_per_req"] = cpu_s * 1e6 / max(1, r["requests"])
        r["cpu_busy"] = cpu_s / wall
        r["rss_kib"] = vm_hwm_kib(pids)
        if pinned:  # /proc/PID/status counts the main thread only: meaningless with 2 threads
            r["preempted_per_s"] = (n1 - n0) / wall
    return r


def alternating(args, workdir, make_backends, workloads):
    """Yields (rep, workload, zipf, proxy, backends) for rondel, HAProxy, nginx and no proxy in
    turn, on each (workload, zipf), args.reps times, so drift hits all alike; stops them all
    when the caller is done (or fails)."""
    b = make_backends()
    proxies = [Rondel(workdir, b), HAProxy(workdir, b), Nginx(workdir, b), NoProxy(b)]
    try:
        for rep in range(args.reps):
            for wl, zipf in workloads:
                for p in proxies:
                    yield rep, wl, zipf, p, b
    finally:
        for p in proxies:
            p.stop()
        b.stop()


def throughput_pass(args, workdir, make_backends, workloads):
    """{workload: {proxy: [measured_run results]}}, every target as fast as it goes."""
    results = {wl: defaultdict(list) for wl, _ in workloads}
    for rep, wl, zipf, p, b in alternating(args, workdir, make_backends, workloads):
        r = measured_run(p, args, zipf, args.duration, seed=rep + 1, backend_pids=b.pids())
        results[wl][p.name].append(r)
        log(f"  rep {rep + 1} {wl:10} {p.name:8} {r['rps']:>10,.0f} req/s p99 {r['p99_us'] / 1000:.2f} ms"
            + (f" cpu {r['cpu_us_per_req']:.1f} us/req busy {r['cpu_busy'] * 100:.0f}% preempt/s {r['preempted_per_s']:.0f}" if "cpu_busy" in r else "")
            + f" core0 {r['core0_busy'] * 100:.0f}% core1 {r['core1_busy'] * 100:.0f}%"
            + f" backends {r['backends_us_per_req']:.1f} us/req"
            + f" errors {r['errors']} load {r['loadavg']}")
    return results


def latency_pass(args, workdir, make_backends):
    """Latency at the same offered load: wrk with --latency-conns connections, each waiting
    --latency-delay-ms after every response, on the --zipf workload. {proxy: [results]}."""
    results = defaultdict(list)
    for rep, _, zipf, p, b in alternating(args, workdir, make_backends, [("latency", args.zipf)]):
        r = measured_run(p, args, zipf, args.duration, seed=rep + 1, backend_pids=b.pids(),
                         conns=args.latency_conns, delay_ms=args.latency_delay_ms)
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


# ---------------------------------------------------------------- calibration

def calibrate_backends(args, workdir):
    """CPU µs per request of one test backend vs one nginx `return 200` server, wrk -> backend."""
    res = {}
    for kind in ("test", "nginx"):
        b = TestBackends(args.backend_bin, 1, workdir) if kind == "test" else NginxBackends(1, workdir)
        try:
            tgt = NoProxy(b)
            run_wrk(tgt.url(), 1, args, 0)
            pids = b.pids()
            t0 = cpu_ticks(pids)
            r = run_wrk(tgt.url(), args.calib_duration, args, 0)
            t1 = cpu_ticks(pids)
            if r["requests"] == 0 or (r["err_status"] + r["err_read"] + r["err_connect"]) > r["requests"] // 100:
                raise RuntimeError(f"calibration of {kind} backend: too many errors: {r}")
            res[kind] = {"cpu_us_per_req": (t1 - t0) / CLK_TCK * 1e6 / max(1, r["requests"]),
                         "rps": r["requests"] / (r["duration_us"] / 1e6), "loadavg": loadavg()}
            log(f"  calibrate {kind}: {res[kind]['cpu_us_per_req']:.2f} us/req, {res[kind]['rps']:.0f} req/s")
        finally:
            b.stop()
    return res


# ---------------------------------------------------------------- distribution / spill

def owners_from(counts):
    """path -> backend that served it most (counts: {backend: Counter(path)})."""
    best = {}
    for name, c in counts.items():
        for path, n in c.items():
            if path not in best or n > best[path][1]:
                best[path] = (name, n)
    return {p: v[0] for p, v in best.items()}


def distribution(args, workdir, make_backends, workloads):
    """Per proxy: a sweep through the unbounded variant (natural owners), then each workload on
    the bounded variant (and on the unbounded one for comparison), with per-request ledgers."""
    rows = []
    route_check = None
    ambiguous = {}  # proxy -> paths the unbounded sweep saw on more than one backend
    b = make_backends(ledger=True)
    try:
        for cls in (Rondel, HAProxy, Nginx):
            # Natural owner of every path: the unbounded variant of the same proxy.
            unb = cls(workdir, b, bounded=False)
            b.truncate_ledgers()
            for _ in range(5):  # sweep until every path has been served at least once
                run_wrk(unb.url(), args.sweep_duration, args, 0, mode="sweep")
                owner = owners_from(b.per_path_counts())
                if len(owner) >= args.paths:
                    break
            seen = Counter(p for c in b.per_path_counts().values() for p in c)
            ambiguous[cls.name] = sum(1 for n in seen.values() if n > 1)
            for wl_name, zipf in workloads:
                b.truncate_ledgers()
                run_wrk(unb.url(), args.duration, args, zipf, seed=7)
                unb_counts = b.per_path_counts()
                rows.append(dist_row(cls.name, "unbounded", wl_name, unb_counts, owner, b.names, args))
            unb.stop()
            if cls is Nginx:
                continue  # nginx has no bounded-load option: its only variant is the one above
            bnd = cls(workdir, b, bounded=True, admin=(cls is Rondel))
            if cls is Rondel:
                route_check = check_routes(bnd, owner, args)
            for wl_name, zipf in workloads:
                b.truncate_ledgers()
                run_wrk(bnd.url(), args.duration, args, zipf, seed=7)
                rows.append(dist_row(cls.name, "bounded 125", wl_name, b.per_path_counts(), owner, b.names, args))
            bnd.stop()
    finally:
        b.stop()
    return rows, {"route_check": route_check, "ambiguous": ambiguous}


def dist_row(proxy, variant, workload, counts, owner, names, args):
    per_backend = {n: sum(counts.get(n, Counter()).values()) for n in names}
    total = sum(per_backend.values())
    avg = total / len(names)
    moved = unknown = 0
    for name, c in counts.items():
        for path, n in c.items():
            o = owner.get(path)
            if o is None:
                unknown += n
            elif o != name:
                moved += n
    known = total - unknown
    return {"proxy": proxy, "variant": variant, "workload": workload, "requests": total,
            "per_backend": per_backend, "max_over_avg": (max(per_backend.values()) / avg) if avg else 0,
            "spill": moved / known if known else 0, "owner_paths": len(owner),
            "unknown_owner_requests": unknown}


def check_routes(proxy, owner, args, sample=200):
    """Compare rondel's own view of each key's first preference (/api/route) with the owner
    learnt from the unbounded sweep, for `sample` paths. Backend ids are host:port."""
    agree = total = 0
    step = max(1, args.paths // sample)
    for i in range(1, args.paths + 1, step):
        path = f"/obj/{i}"
        if path not in owner:
            continue
        with urllib.request.urlopen(
                f"http://127.0.0.1:{proxy.admin_port}/api/route?pool=p&key={path}", timeout=5) as r:
            doc = json.load(r)
        first = doc["preference"][0]["id"]
        total += 1
        agree += PORT_TO_NAME.get(first) == owner[path]
    return {"agree": agree, "total": total}


# ---------------------------------------------------------------- idle connections

IDLE_BATCH = 100         # connections opened, then sent a request, then read, per step
IDLE_FILL_DEADLINE = 45  # s to open all N connections: below every proxy's keep-alive timeout
                         # (rondel idle_timeout 60s, HAProxy timeout http-keep-alive 60s, nginx
                         # keepalive_timeout 75s), so none closes the first connections meanwhile
IDLE_SETTLE = 0.5        # s between the last response and an RSS reading
IDLE_SOCK_TIMEOUT = 10   # s per connect/send/recv


def idle_request(port, i, paths):
    return (f"GET /obj/{(i - 1) % paths + 1} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "User-Agent: rondel-bench-idle\r\nAccept: */*\r\n\r\n").encode()


def read_response(s):
    """Read one complete response with Content-Length; fail unless it is a keep-alive 200."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError(f"connection closed before the response head ({buf[:80]!r})")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split()
    if len(status) < 2 or status[1] != b"200":
        raise RuntimeError(f"unexpected response: {lines[0]!r}")
    length = None
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        k, v = k.strip().lower(), v.strip().lower()
        if k == b"content-length":
            length = int(v)
        elif k == b"connection" and v == b"close":
            raise RuntimeError("the proxy answered with Connection: close")
    if length is None:
        raise RuntimeError("response without Content-Length")
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed in the response body")
        body += chunk
    if len(body) != length:
        raise RuntimeError(f"{len(body) - length} bytes after the response")


def idle_fill(port, socks, upto, paths, deadline):
    """Open connections (in batches) until len(socks) == upto; one request and its complete
    response on each; the connections stay open (appended to socks, closed by the caller)."""
    while len(socks) < upto:
        if time.time() > deadline:
            raise RuntimeError(f"idle pass: could not open {upto} connections within "
                               f"{IDLE_FILL_DEADLINE}s (got {len(socks)})")
        batch = []
        for _ in range(min(IDLE_BATCH, upto - len(socks))):
            s = socket.create_connection(("127.0.0.1", port), timeout=IDLE_SOCK_TIMEOUT)
            socks.append(s)
            batch.append((len(socks), s))
        for i, s in batch:
            s.sendall(idle_request(port, i, paths))
        for _, s in batch:
            read_response(s)


def idle_closed_count(socks):
    """Connections with something to read (EOF: closed by the proxy) or an error."""
    p = select.poll()
    for s in socks:
        p.register(s.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return len(p.poll(0))


def idle_run(cls, workdir, backends, n, args):
    """One proxy: warm up, then RSS after N/5 and after N idle keep-alive connections."""
    t_start = time.time()
    proxy = cls(workdir, backends, bounded=True, idle=n)
    socks = []
    try:
        pid = proxy.proc.pid
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
        if cls is Rondel and comm != "rondel":
            raise RuntimeError(f"pid {pid} is {comm!r}, not rondel (prlimit did not exec?)")
        # Warm-up: a few hundred requests on a handful of connections (first-use allocations).
        warm = [socket.create_connection(("127.0.0.1", proxy.port), timeout=IDLE_SOCK_TIMEOUT)
                for _ in range(8)]
        try:
            for rnd in range(50):
                for j, s in enumerate(warm):
                    s.sendall(idle_request(proxy.port, rnd * len(warm) + j + 1, args.paths))
                for s in warm:
                    read_response(s)
        finally:
            for s in warm:
                s.close()
        time.sleep(IDLE_SETTLE)
        la = loadavg()
        rss_warm = vm_rss_kib(proxy.pids())
        n_low = n // 5
        t0 = time.time()
        deadline = t0 + IDLE_FILL_DEADLINE
        idle_fill(proxy.port, socks, n_low, args.paths, deadline)
        t_low = time.time() - t0
        time.sleep(IDLE_SETTLE)
        pids = proxy.pids()
        rss_low = vm_rss_kib(pids)
        fds_low = open_fds(pids)
        t1 = time.time()
        idle_fill(proxy.port, socks, n, args.paths, deadline)
        open_s = t_low + time.time() - t1
        time.sleep(IDLE_SETTLE)
        pids = proxy.pids()
        rss_high = vm_rss_kib(pids)
        fill_wall = time.time() - t0
        fds = open_fds(pids)
        closed = idle_closed_count(socks)
        if closed:
            raise RuntimeError(f"{cls.name}: {closed} of {n} idle connections were closed or "
                               f"readable at the N reading")
        r = {"n_low": n_low, "n": n, "rss_warm_kib": rss_warm, "rss_low_kib": rss_low,
             "rss_kib": rss_high,
             "bytes_per_conn": (rss_high - rss_low) * 1024 / (n - n_low),
             "open_s": open_s, "fill_wall_s": fill_wall, "loadavg": la, "open_fds_low": fds_low, "open_fds": fds,
             "nofile": {str(p): max_open_files(p) for p in pids}}
    finally:
        for s in socks:
            s.close()
        proxy.stop()
    r["wall_s"] = time.time() - t_start
    return r


def idle_pass(args, workdir):
    """Memory per idle keep-alive client connection, for each proxy, alternating over reps.
    The client is this process, pinned to the client core for the pass."""
    n = args.idle
    if n < 10:
        raise RuntimeError("--idle must be at least 10")
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    if n + 2000 > hi - lo:
        raise RuntimeError(f"--idle {n}: only {hi - lo} local ports (ip_local_port_range)")
    old_limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    old_affinity = os.sched_getaffinity(0)
    soft, hard = old_limits
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
    client_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    runs = defaultdict(list)
    t0 = time.time()
    pass_deadline = t0 + args.reps * 3 * (IDLE_FILL_DEADLINE + 60)
    b = TestBackends(args.backend_bin, args.backends, workdir)
    try:
        os.sched_setaffinity(0, {int(CLIENT_CORE)})
        for rep in range(args.reps):
            for cls in (Rondel, HAProxy, Nginx):
                if time.time() > pass_deadline:
                    raise RuntimeError("idle pass: over its time bound")
                r = idle_run(cls, workdir, b, n, args)
                runs[cls.name].append(r)
                log(f"  idle rep {rep + 1} {cls.name:8} {r['bytes_per_conn']:7.0f} B/conn  RSS "
                    f"{r['rss_warm_kib'] / 1024:.1f} (warm) / {r['rss_low_kib'] / 1024:.1f} ({r['n_low']}) / "
                    f"{r['rss_kib'] / 1024:.1f} MiB ({n})  fds {r['open_fds']}  open {r['open_s']:.1f}s wall {r['wall_s']:.1f}s "
                    f"load {r['loadavg']}")
    finally:
        os.sched_setaffinity(0, old_affinity)
        b.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, old_limits)
    return {"n": n, "n_low": n // 5, "reps": args.reps, "batch": IDLE_BATCH, "backends": args.backends,
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
    out.append("RSS after the warm-up (MiB): " + "; ".join(
        f"{name} " + ", ".join(f"{r['rss_warm_kib'] / 1024:.1f}" for r in rs) for name, rs in runs.items())
               + f". Open fds of the proxy at {n_low:,} → {n:,}: " + "; ".join(
        f"{name} " + ", ".join(f"{r['open_fds_low']} → {r['open_fds']}" for r in rs) for name, rs in runs.items())
               + ". Open-file limits (soft, per process): " + "; ".join(
        f"{name} " + "/".join(str(v) for v in rs[0]["nofile"].values()) for name, rs in runs.items())
               + f"; client {idle['client_nofile']}. Load average at the start of each run: " + "; ".join(
        f"{name} " + ", ".join(r["loadavg"].split()[0] for r in rs) for name, rs in runs.items())
               + f". Pass wall time {idle['pass_s']:.0f} s.")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- workers

# The workers pass: (proxy class, workers/threads), measured in this order in every rep.
WORKER_CONFIGS = [(Rondel, 1), (Rondel, 2), (HAProxy, 1), (HAProxy, 2)]


def worker_setting(name, n):
    return f"`workers: {n}`" if name == "rondel" else f"`nbthread {n}`"


def workers_pass(args, workdir, make_backends):
    """rondel workers 1 vs 2 and HAProxy nbthread 1 vs 2 with the throughput configurations
    otherwise, the throughput load (the --zipf workload), nothing pinned: the proxy, wrk and the
    backends all run on any core. Reps alternate the four configurations."""
    runs = defaultdict(list)
    b = make_backends(core=None)
    proxies = []
    try:
        for cls, n in WORKER_CONFIGS:
            proxies.append((f"{cls.name}/{n}", cls(workdir, b, workers=n, core=None)))
        for rep in range(args.reps):
            for key, p in proxies:
                r = measured_run(p, args, args.zipf, args.duration, seed=rep + 1, pinned=False)
                runs[key].append(r)
                log(f"  workers rep {rep + 1} {key:10} {r['rps']:>10,.0f} req/s p99 {r['p99_us'] / 1000:.2f} ms"
                    f" cpu {r['cpu_us_per_req']:.1f} us/req busy {r['cpu_busy'] * 100:.0f}%"
                    f" machine {r['machine_busy'] * 100:.0f}% errors {r['errors']} load {r['loadavg']}")
    finally:
        for _, p in proxies:
            p.stop()
        b.stop()
    return {"zipf": args.zipf, "reps": args.reps, "duration": args.duration, "conns": args.conns,
            "backends": args.backends, "backend_kind": b.kind, "nice": args.nice,
            "cpus": os.cpu_count(), "runs": dict(runs)}


def workers_section(w):
    cpus = w["cpus"]
    load = f"Zipf s={w['zipf']}" if w["zipf"] else "uniform"
    out = [f"## Workers (unpinned, {cpus} cores)", "",
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


# ---------------------------------------------------------------- output

def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_range(xs, f):
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


def throughput_tables(results):
    """The req/s, latency, CPU and RSS table and the client-core table of one throughput pass
    (lines of markdown)."""
    out = []
    out.append("Medians, (min–max) over reps. Ratios are to HAProxy in the same run "
               "(req/s: higher is better; p99, CPU, RSS: lower is better).")
    out.append("")
    out.append("| workload | proxy | req/s | p50 ms | p99 ms | errors | proxy CPU µs/req | core 0 µs/req | proxy busy | core 0 / 1 busy | preempt/s | peak RSS MiB | req/s ÷ HAProxy | p99 ÷ HAProxy | CPU/req ÷ HAProxy | RSS ÷ HAProxy |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for wl, by_proxy in results.items():
        h = by_proxy.get("haproxy", [])
        h_rps = med([r["rps"] for r in h])
        h_p99 = med([r["p99_us"] for r in h])
        h_cpu = med([r["cpu_us_per_req"] for r in h])
        h_rss = med([r["rss_kib"] for r in h])
        for name, runs in by_proxy.items():
            rps = [r["rps"] for r in runs]
            p50 = [r["p50_us"] / 1000 for r in runs]
            p99 = [r["p99_us"] / 1000 for r in runs]
            errs = sum(r["errors"] for r in runs)
            has_cpu = "cpu_us_per_req" in runs[0]
            cpu = [r["cpu_us_per_req"] for r in runs] if has_cpu else []
            busy = [r["cpu_busy"] * 100 for r in runs] if has_cpu else []
            rss = [r["rss_kib"] / 1024 for r in runs] if has_cpu else []
            out.append("| " + " | ".join([
                wl, name,
                fmt_range(rps, lambda x: f"{x:,.0f}"),
                fmt_range(p50, lambda x: f"{x:.2f}"),
                fmt_range(p99, lambda x: f"{x:.2f}"),
                str(errs),
                fmt_range(cpu, lambda x: f"{x:.1f}"),
                fmt_range([r["core0_us_per_req"] for r in runs], lambda x: f"{x:.1f}") if has_cpu else "n/a",
                fmt_range(busy, lambda x: f"{x:.0f}%"),
                f"{med([r['core0_busy'] * 100 for r in runs]):.0f}% / {med([r['core1_busy'] * 100 for r in runs]):.0f}%",
                f"{med([r['preempted_per_s'] for r in runs]):.0f}" if has_cpu else "n/a",
                f"{max(rss):.1f}" if rss else "n/a",
                ratio(med(rps), h_rps),
                ratio(med([r["p99_us"] for r in runs]), h_p99),
                ratio(med(cpu), h_cpu) if has_cpu else "n/a",
                ratio(med([r["rss_kib"] for r in runs]), h_rss) if has_cpu else "n/a",
            ]) + " |")
    out.append("")
    out.append(f"Where the client core (core {CLIENT_CORE}: wrk and the backends) spends its time, per "
               "request, in the same runs. With a proxy that leaves its own core idle, this core "
               "sets req/s. Backends = CPU time of the backend processes (/proc/PID/stat, their "
               "kernel work included); the rest is wrk and interrupts. Wake-up IPIs received per "
               "1,000 requests (/proc/interrupts): RES = rescheduling, CAL = function call.")
    out.append("")
    out.append(f"| workload | proxy | core {CLIENT_CORE} µs/req | backends µs/req | wrk and rest µs/req "
               f"| RES IPIs to core {CLIENT_CORE} | CAL IPIs to core {PROXY_CORE} | backends µs/req ÷ HAProxy |")
    out.append("|---|---|---|---|---|---|---|---|")
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
    out.append("")
    out.append("Load average at the start of each measured run: " + "; ".join(
        f"{wl}/{name}: " + ", ".join(r["loadavg"].split()[0] for r in runs)
        for wl, by_proxy in results.items() for name, runs in by_proxy.items()))
    return out


def batch_section(batch, args):
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
    out = header(meta)
    out.append(f"Backends: {args.backends} × {meta['backend_kind']}; conns {args.conns}; wrk -t1; "
               f"{args.duration}s × {args.reps} reps (alternating); paths {args.paths}; Zipf s={args.zipf}; "
               f"nice {args.nice}  ")
    if calib:
        out.append("Backend calibration (wrk → one backend, backend CPU µs/req): " + ", ".join(
            f"{k} {v['cpu_us_per_req']:.2f}" for k, v in calib.items()))
    out.append("")
    out += throughput_tables(results)
    if dist_rows:
        out.append("")
        out.append("Distribution (separate pass with per-request ledgers at the backends; "
                   "spill = share of requests served by a backend other than the one the same "
                   "proxy's unbounded variant serves that path from):")
        out.append("")
        out.append("| workload | proxy | variant | requests | per-backend requests | max/avg | spill |")
        out.append("|---|---|---|---|---|---|---|")
        for d in dist_rows:
            out.append(f"| {d['workload']} | {d['proxy']} | {d['variant']} | {d['requests']:,} | "
                       + " / ".join(str(v) for v in d["per_backend"].values())
                       + f" | {d['max_over_avg']:.2f} | {d['spill'] * 100:.1f}% |")
        unknown = sum(d["unknown_owner_requests"] for d in dist_rows)
        out.append("")
        out.append(f"Paths with a learnt owner: " + ", ".join(
            sorted({f"{d['proxy']} {d['owner_paths']}" for d in dist_rows}))
                   + f"; requests to paths with no learnt owner (excluded from spill): {unknown}.")
    if meta.get("dist_checks"):
        out.append("Paths the unbounded sweep saw served by more than one backend: " + ", ".join(
            f"{k} {v}" for k, v in meta["dist_checks"]["ambiguous"].items()) + ".")
    if meta.get("dist_checks", {}).get("route_check"):
        rc = meta["dist_checks"]["route_check"]
        out.append(f"rondel /api/route first preference agrees with the unbounded sweep's owner "
                   f"for {rc['agree']}/{rc['total']} sampled paths.")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- profile

def tcp_out_segments():
    """The kernel's TcpOutSegs counter (all TCP segments sent on the machine; on loopback each
    segment is counted once, by its sender)."""
    out = subprocess.run(["nstat", "-az", "--json", "TcpOutSegs"], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)["kernel"]["TcpOutSegs"]
    except (ValueError, KeyError):
        return None


def syscall_counts(pids, url, args, zipf, seconds=5, backend_pids=()):
    """Syscalls made by pids while wrk runs for `seconds`: {name: count}, and wrk's result (with
    "segments": TCP segments sent machine-wide meanwhile, when nstat is there, and the context
    switches of the proxy, of the backends and of the whole machine)."""
    p = subprocess.Popen(["taskset", "-c", CLIENT_CORE, "perf", "stat", "-x", ",", "-e", "syscalls:sys_enter_*",
                          "-p", ",".join(str(x) for x in pids)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    STARTED.append(p)
    time.sleep(0.5)
    seg0 = tcp_out_segments() if shutil.which("nstat") else None
    sw0 = (voluntary_switches(pids), voluntary_switches(backend_pids), machine_switches())
    r = run_wrk(url, seconds, args, zipf, seed=3)
    sw1 = (voluntary_switches(pids), voluntary_switches(backend_pids), machine_switches())
    seg1 = tcp_out_segments() if seg0 is not None else None
    r["switches"] = {"proxy_voluntary": sw1[0] - sw0[0], "backends_voluntary": sw1[1] - sw0[1],
                     "machine": sw1[2] - sw0[2]}
    if seg0 is not None and seg1 is not None:
        r["segments"] = seg1 - seg0
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    STARTED.remove(p)
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


def profile(args, workdir, make_backends, zipf, outdir, stamp):
    b = make_backends(ledger=False)
    try:
        r = Rondel(workdir, b, bounded=True)
        run_wrk(r.url(), 1, args, zipf)
        sys_tables = {}
        backend_sys = {}  # the backends' syscalls per request behind each proxy
        for cls in (HAProxy, Nginx):
            other = cls(workdir, b, bounded=True)
            run_wrk(other.url(), 1, args, zipf)
            sys_tables[cls.name] = syscall_counts(other.pids(), other.url(), args, zipf,
                                                  backend_pids=b.pids())
            backend_sys[cls.name] = syscall_counts(b.pids(), other.url(), args, zipf)
            other.stop()
        sys_tables["rondel"] = syscall_counts(r.pids(), r.url(), args, zipf, backend_pids=b.pids())
        backend_sys["rondel"] = syscall_counts(b.pids(), r.url(), args, zipf)
        data = os.path.join(workdir, "perf.data")
        wrk = subprocess.Popen(
            NICE + ["taskset", "-c", CLIENT_CORE, "wrk", "-t1", f"-c{args.conns}", f"-d{args.profile_duration + 2}s",
             "--timeout", "2s", "-s", LUA, r.url()],
            env=dict(os.environ, BENCH_PATHS=str(args.paths), BENCH_ZIPF=str(zipf)),
            stdout=subprocess.DEVNULL)
        STARTED.append(wrk)
        time.sleep(1)
        la = loadavg()
        subprocess.run(["taskset", "-c", CLIENT_CORE, "perf", "record", "-g", "-o", data, "-p", str(r.proc.pid),
                        "--", "sleep", str(args.profile_duration)],
                       capture_output=True, timeout=args.profile_duration + 60)
        wrk.wait(args.profile_duration + 30)
        STARTED.remove(wrk)
        r.stop()
        reports = []
        for title, extra, n in (
                ("share of samples by object", ["--no-children", "--sort", "dso", "-g", "none"], 25),
                ("self time by symbol", ["--no-children", "--sort", "dso,symbol", "-g", "none"], 60),
                ("user space only (rondel, libuv, libc, libstdc++), % of all samples",
                 ["--no-children", "--sort", "dso,symbol", "-g", "none",
                  "--dsos", "rondel,libuv.so.1.0.0,libc.so.6,libstdc++.so.6.0.30"], 40),
                ("including children", ["--children", "--sort", "symbol", "-g", "none"], 60)):
            rep = subprocess.run(["perf", "report", "--stdio", "-i", data] + extra,
                                 capture_output=True, text=True, timeout=300).stdout
            # Without the empty trailing columns ("-  -") and the padding a long symbol leaves.
            lines = [re.sub(r"(\s+-)*\s*$", "", l) for l in rep.splitlines()
                     if l.strip() and not l.startswith("#")]
            if extra[-1] == "none" and "dso,symbol" in extra and "--dsos" not in extra:
                # Whole-report sums by category (the list below is cut at n lines).
                cats = {"allocation (malloc/free/new/delete)": ("malloc", "free", "operator new",
                                                               "operator delete", "_int_", "tcache"),
                        "logging (LogSink, Logger, access log)": ("LogSink", "Logger", "access_log", "AccessLog"),
                        "HTTP parsing and head writing (rondel::http, llhttp)": ("rondel::http::", "llhttp"),
                        "routing (rondel::core, Router)": ("rondel::core::", "rondel::proxy::Router")}
                sums = {k: 0.0 for k in cats}
                for l in lines:
                    f = l.split()
                    if not f or not f[0].endswith("%") or "[k]" in l:
                        continue
                    sym = l.split("[.]", 1)[-1]
                    for k, pats in cats.items():
                        if any(p in sym for p in pats):
                            sums[k] += float(f[0][:-1])
                reports.append("## user-space categories (sum of self % over the whole report)\n\n"
                               + "\n".join(f"{k}: {v:.2f}%" for k, v in sums.items()) + "\n")
            reports.append(f"## {title}: perf report --stdio {' '.join(extra)} (first {n} lines)\n\n"
                           + "\n".join(lines[:n]) + "\n")
        order = ["rondel", "haproxy", "nginx"]
        sys_lines = ["## syscalls per request under the same load (perf stat -e 'syscalls:sys_enter_*' -p PIDs, 5 s)\n"]
        sys_lines += syscall_table(sys_tables, order)
        sys_lines.append(f"{'(requests)':20}" + "".join(f"{sys_tables[p][1]['requests']:>12,}" for p in order))
        if all("segments" in sys_tables[p][1] for p in order):
            sys_lines.append(f"{'TCP segments':20}" + "".join(
                f"{sys_tables[p][1]['segments'] / max(1, sys_tables[p][1]['requests']):12.3f}" for p in order)
                + "   (per request, all four legs, machine-wide: nstat TcpOutSegs)")
        for key, label in (("proxy_voluntary", "proxy blocked"), ("backends_voluntary", "backends blocked"),
                           ("machine", "context switches")):
            sys_lines.append(f"{label:20}" + "".join(
                f"{sys_tables[p][1]['switches'][key] / max(1, sys_tables[p][1]['requests']):12.3f}" for p in order)
                + ("   (per request: voluntary context switches, /proc/PID/task/*/status)" if key != "machine"
                   else "   (per request, machine-wide: /proc/stat ctxt)"))
        sys_lines.append("")
        sys_lines.append("## the backends' syscalls per request behind each proxy (same method, "
                         "perf stat -p on the backend processes, 5 s)\n")
        sys_lines += syscall_table(backend_sys, order)
        path = os.path.join(outdir, f"perf-rondel-{stamp}.txt")
        with open(path, "w") as f:
            f.write(f"# rondel under wrk -t1 -c{args.conns}, Zipf s={zipf}, {args.backends} backends "
                    f"({b.kind}), rondel pinned to core {PROXY_CORE}; perf record -g -p PID for "
                    f"{args.profile_duration}s; load average {la}\n\n")
            f.write("\n".join(sys_lines) + "\n\n")
            f.write("\n".join(reports))
        log(f"profile written to {path}")
        return path
    finally:
        b.stop()


# ---------------------------------------------------------------- main

def versions(rondel_binary):
    def first_line(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"
    head = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    try:
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.count("\n")
    except (OSError, subprocess.TimeoutExpired):
        dirty = "?"
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(rondel_binary)))
    where = ""
    if os.path.relpath(os.path.realpath(rondel_binary), os.path.realpath(ROOT)).startswith(".."):
        # BUILD_DIR elsewhere: the commit and modified files above describe this checkout, not it.
        where = f" {rondel_binary}, outside this checkout,"
    return (f"rondel {head} ({dirty} modified tracked files; binary{where} built {built}), "
            + first_line(["haproxy", "-v"]).split(" - ")[0] + ", "
            + first_line(["nginx", "-v"]).replace("nginx version: ", "") + ", "
            + first_line(["wrk", "-v"]).split(" Copyright")[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backends", type=int, default=4)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--paths", type=int, default=10000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--backend", choices=["auto", "test", "test-each", "nginx"], default="auto",
                    help="backend kind; auto = measure both, keep the cheaper per request")
    ap.add_argument("--quick", action="store_true", help="1 rep of 3 s, short distribution pass, no profile")
    ap.add_argument("--no-dist", action="store_true", help="skip the distribution/spill pass")
    ap.add_argument("--profile", action="store_true", help="also perf-profile rondel (Zipf workload)")
    ap.add_argument("--profile-only", action="store_true", help="only perf-profile rondel")
    ap.add_argument("--profile-duration", type=int, default=10)
    ap.add_argument("--idle", type=int, default=None, metavar="N",
                    help="idle keep-alive connections held per proxy in the memory pass "
                         "(default 10000, 2000 with --quick; 0 skips the pass)")
    ap.add_argument("--idle-only", action="store_true",
                    help="only the idle-connection memory pass")
    ap.add_argument("--workers-pass", action="store_true",
                    help="add the workers pass (rondel workers 1 vs 2, HAProxy nbthread 1 vs 2, "
                         "unpinned) to a full run")
    ap.add_argument("--workers-only", action="store_true", help="only the workers pass")
    ap.add_argument("--batch-pass", action="store_true",
                    help="also run the throughput pass with wrk and the backends under SCHED_BATCH")
    ap.add_argument("--latency-pass", action="store_true",
                    help="also measure latency at the same offered load (wrk delay() between requests)")
    ap.add_argument("--latency-only", action="store_true", help="only the latency pass")
    ap.add_argument("--latency-conns", type=int, default=100)
    ap.add_argument("--latency-delay-ms", type=int, default=1)
    ap.add_argument("--calib-duration", type=int, default=5)
    ap.add_argument("--sweep-duration", type=int, default=4)
    ap.add_argument("--nice", type=int, default=0,
                    help="run proxies, backends and wrk at this nice level (e.g. -10 on a shared machine)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--out", default=os.path.join(BENCH_DIR, "results"))
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.latency_conns < 1 or args.latency_delay_ms < 1:
        ap.error("--latency-conns and --latency-delay-ms must be at least 1")
    if args.quick:
        args.reps, args.duration, args.calib_duration, args.sweep_duration = 1, 3, 2, 3
    if args.idle is None:
        args.idle = 2000 if args.quick else 10000
    if sum([args.idle_only, args.profile_only, args.workers_only]) > 1:
        ap.error("--idle-only, --profile-only and --workers-only exclude each other")
    if args.idle_only and args.idle <= 0:
        ap.error("--idle-only needs --idle N > 0")
    if args.nice:
        NICE.extend(["nice", "-n", str(args.nice)])
    Rondel.binary = os.path.join(args.build_dir, "src", "server", "rondel")
    args.backend_bin = os.path.join(args.build_dir, "tools", "test_backend", "rondel-test-backend")
    os.makedirs(args.out, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta = {"command": args.command or " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "host": f"{os.cpu_count()} CPUs, " + open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip()
            + f", Linux {os.uname().release}", "load_before": loadavg(), "versions": versions(Rondel.binary)}
    workloads = [("uniform", 0.0), (f"zipf {args.zipf}", args.zipf)]
    workdir = tempfile.mkdtemp(prefix="rondel-bench-")
    calib = None
    ok = False
    try:
        kind = args.backend
        if kind == "auto" and (args.profile_only or args.idle_only or args.workers_only or args.latency_only):
            kind = "test"
        if kind == "auto":
            log("calibrating backends ...")
            calib = calibrate_backends(args, workdir)
            kind = min(calib, key=lambda k: calib[k]["cpu_us_per_req"])
        meta["backend_kind"] = {"test": "rondel-test-backend (1 process for all, one event loop)",
                                "test-each": "rondel-test-backend (1 process each)",
                                "nginx": "nginx return 200 (1 process, 1 worker)"}[kind]

        def make_backends(ledger=False, core=CLIENT_CORE):
            if kind in ("test", "test-each"):
                return TestBackends(args.backend_bin, args.backends, workdir, ledger, core,
                                    each=kind == "test-each")
            return NginxBackends(args.backends, workdir, ledger, core)

        def write_results(prefix, text, data):
            base = os.path.join(args.out, f"{prefix}-{stamp}{'-quick' if args.quick else ''}")
            with open(base + ".md", "w") as f:
                f.write(text)
            with open(base + ".json", "w") as f:
                json.dump(data, f, indent=1)
            print(text)
            log(f"results written to {base}.md")

        if args.profile_only:
            ppath = profile(args, workdir, make_backends, args.zipf, args.out, stamp)
            print(open(ppath).read())
            ok = True
            return

        if args.idle_only:
            log(f"idle-connection pass ({args.idle} connections) ...")
            idle = idle_pass(args, workdir)
            meta["load_after"] = loadavg()
            write_results("idle", "\n".join(header(meta)) + "\n\n" + idle_section(idle),
                          {"meta": meta, "idle": idle})
            ok = True
            return

        if args.latency_only:
            log("latency pass (same offered load) ...")
            lat = latency_pass(args, workdir, make_backends)
            meta["load_after"] = loadavg()
            write_results("latency", "\n".join(header(meta)) + "\n\n" + latency_section(lat, args),
                          {"meta": meta, "latency_runs": lat})
            ok = True
            return

        if args.workers_only:
            log("workers pass (unpinned) ...")
            workers = workers_pass(args, workdir, make_backends)
            meta["load_after"] = loadavg()
            write_results("workers", "\n".join(header(meta)) + "\n\n" + workers_section(workers),
                          {"meta": meta, "workers": workers})
            ok = True
            return

        results = throughput_pass(args, workdir, make_backends, workloads)
        batch = None
        if args.batch_pass:
            log("throughput pass with wrk and the backends under SCHED_BATCH ...")
            CLIENT_SCHED.extend(["chrt", "-b", "0"])
            try:
                batch = throughput_pass(args, workdir, make_backends, workloads)
            finally:
                CLIENT_SCHED.clear()
        lat = None
        if args.latency_pass:
            log("latency pass (same offered load) ...")
            lat = latency_pass(args, workdir, make_backends)
        dist_rows = []
        if not args.no_dist:
            log("distribution pass ...")
            dist_rows, meta["dist_checks"] = distribution(args, workdir, make_backends, workloads)
        idle = None
        if args.idle > 0:
            log(f"idle-connection pass ({args.idle} connections) ...")
            idle = idle_pass(args, workdir)
        workers = None
        if args.workers_pass:
            log("workers pass (unpinned) ...")
            workers = workers_pass(args, workdir, make_backends)
        meta["load_after"] = loadavg()
        text = tables(results, dist_rows, calib, args, meta)
        if batch:
            text += "\n" + batch_section(batch, args)
        if lat:
            text += "\n" + latency_section(lat, args)
        if idle:
            text += "\n" + idle_section(idle)
        if workers:
            text += "\n" + workers_section(workers)
        if args.profile:
            log("profiling rondel ...")
            ppath = profile(args, workdir, make_backends, args.zipf, args.out, stamp)
            text += f"\nProfile: {os.path.relpath(ppath, ROOT)}\n"
        write_results("bench", text, {"meta": meta, "calibration": calib,
                                      "runs": {wl: dict(v) for wl, v in results.items()},
                                      "batch_runs": {wl: dict(v) for wl, v in batch.items()} if batch else None,
                                      "latency_runs": lat,
                                      "distribution": dist_rows, "idle": idle, "workers": workers})
        ok = True
    finally:
        stop_all()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"work files (configs, stderr of each proxy) kept in {workdir}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
