#!/usr/bin/env python3
"""Issue 38's harness: large HTTP/1.1 bodies at the limit, rondel beside HAProxy 2.6, the floor
(tools/bench/floor_relay.c: a splice relay without HTTP) and the client straight at the backends.

  tools/bench/limit38.py [--rounds 3] [--duration 5] [--sizes 256k] [--conns 50]
                         [--targets rondel,haproxy,floor,none] [--rondel-b BIN] [--nginx]
                         [--breakdown SECONDS]

Backends: one `floor_relay backend 4` process (4 listeners, head and body written with one
writev from user memory, keep-alive) on core 1 with wrk (`-t1 -c50`, tools/bench/bodies.lua,
GET /<size>/obj/<i> over 10,000 paths). Every target alone on core 0. Each round runs every
target once, the order rotated per round, so drift hits all alike. Per run: req/s, p99, the
target's CPU per request (user + system from /proc), its voluntary and involuntary context
switches per request, and the load average before.

--rondel-b BIN adds a second rondel binary ("rondel-b") for A/B runs of a change.
--breakdown S: after the rounds, per target and size, S seconds of `perf stat -e
'syscalls:sys_enter_*'` (every syscall kind, per request) and the switches, under the same load.

Writes a Markdown table to stdout and the raw runs to tools/bench/results/limit38-DATE.json.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "pylib")]

from rondel_support import procfs  # noqa: E402
from rondel_support.procfs import CLK_TCK  # noqa: E402
from rondel_support.procs import Process  # noqa: E402

from rondel_bench.context import Bench, CLIENT_CORE, PROXY_CORE  # noqa: E402
from rondel_bench.load import run_wrk  # noqa: E402
from rondel_bench.proxies import HAProxy, Nginx, NoProxy, Rondel, RondelBaseline  # noqa: E402
from rondel_bench.report import med  # noqa: E402

BODIES_LUA = os.path.join(HERE, "bodies.lua")
FLOOR_SRC = os.path.join(HERE, "floor_relay.c")


def build_floor(workdir):
    out = os.path.join(workdir, "floor_relay")
    subprocess.run(["cc", "-O2", "-o", out, FLOOR_SRC], check=True)
    return out


class FloorBackends:
    """`floor_relay backend N` on the client core: names b1..bN, ports read from its output."""
    kind = "floor-backend"

    def __init__(self, ctx, binary, n):
        self.names = [f"b{i + 1}" for i in range(n)]
        self.process = Process(ctx.prefix(CLIENT_CORE) + [binary, "backend", str(n)], ctx.registry)
        self.process.out.wait_for_all(r"^listening ", n)
        self.ports = [int(l.rsplit(":", 1)[1]) for l in self.process.lines(r"^listening ")]

    def pids(self):
        return [self.process.pid]

    def stop(self):
        self.process.stop()


class Floor:
    """The floor: `floor_relay relay PIPE PORTS...` on the proxy core."""
    name = "floor"

    def __init__(self, ctx, binary, backends, pipe_bytes):
        argv = ctx.prefix(PROXY_CORE) + [binary, "relay", str(pipe_bytes)]
        self.process = Process(argv + [str(p) for p in backends.ports], ctx.registry)
        self.process.wait_for(r"^listening ")
        self.port = int(self.process.lines(r"^listening ")[0].rsplit(":", 1)[1])

    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def pids(self):
        return [self.process.pid]

    def stop(self):
        self.process.stop()


class RondelB(RondelBaseline):
    name = "rondel-b"


def switches(pids):
    return procfs.voluntary_switches(pids), procfs.nonvoluntary_switches(pids)


def one_run(ctx, target, size, duration, conns, seed):
    """Warm-up 1 s, then `duration` s of wrk; figures of the target's process around it."""
    env = {"BENCH_SIZES": f"{size}:1"}
    run_wrk(ctx, target.url(), 1, 0, seed=seed + 1000, conns=conns, lua=BODIES_LUA, lua_env=env)
    la = procfs.loadavg()
    pids = target.pids()
    t0 = procfs.cpu_ticks(pids) if pids else 0
    s0 = switches(pids) if pids else (0, 0)
    b0 = [procfs.core_busy_ticks(c) for c in (PROXY_CORE, CLIENT_CORE)]
    i0 = procfs.ipi_counts()
    w0 = time.time()
    r = run_wrk(ctx, target.url(), duration, 0, seed=seed, conns=conns, lua=BODIES_LUA,
                lua_env=env)
    wall = time.time() - w0
    b1 = [procfs.core_busy_ticks(c) for c in (PROXY_CORE, CLIENT_CORE)]
    i1 = procfs.ipi_counts()
    t1 = procfs.cpu_ticks(pids) if pids else 0
    s1 = switches(pids) if pids else (0, 0)
    n = max(1, r["requests"])
    r.update(target=target.name, size=size, loadavg_before=la, loadavg_after=procfs.loadavg(),
             rps=r["requests"] / (r["duration_us"] / 1e6),
             core0_busy=(b1[0] - b0[0]) / CLK_TCK / wall, core1_busy=(b1[1] - b0[1]) / CLK_TCK / wall)
    # wake-up IPIs (rescheduling + function call) each core received, per request
    for core in (PROXY_CORE, CLIENT_CORE):
        r[f"ipi{core}_per_req"] = sum(i1[k] - i0[k] for k in (f"RES{core}", f"CAL{core}")
                                      if k in i0) / n
    if pids:
        r["cpu_us_per_req"] = (t1 - t0) / CLK_TCK * 1e6 / n
        r["vcsw_per_req"] = (s1[0] - s0[0]) / n
        r["ivcsw_per_req"] = (s1[1] - s0[1]) / n
    return r


# The syscalls counted by the breakdown (every sys_enter_* tracepoint takes perf ~14 s to set
# up here; these take well under one).
SYSCALLS = ("read", "write", "readv", "writev", "splice", "epoll_ctl", "epoll_wait", "epoll_pwait",
            "recvfrom", "sendto", "recvmsg", "sendmsg", "clock_gettime", "accept4", "close", "fcntl",
            "ioctl", "setsockopt", "getsockopt", "connect", "socket", "pipe2", "timerfd_settime")


def breakdown(ctx, target, size, seconds, conns, profile_to=None):
    """Under wrk's load for `seconds`: `perf stat` of SYSCALLS' tracepoints and context switches
    on the target, and its voluntary/involuntary switches from /proc; {kind: per request}.
    perf is attached first (its set-up takes a moment), then wrk runs, then perf stops, so the
    counts cover the whole wrk run plus a little idle time (a few epoll_waits).
    profile_to: then `perf record -g` of the proxy core (the target is alone there) during a
    second wrk run, its report (self time by comm, dso, symbol) written there."""
    if not target.pids():
        return {}
    env = dict(os.environ, BENCH_PATHS="10000", BENCH_SIZES=f"{size}:1")

    def wrk():
        out = subprocess.run(ctx.prefix(CLIENT_CORE) + [
            "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "2s", "-s", BODIES_LUA,
            target.url()], env=env, capture_output=True, text=True, timeout=seconds + 30)
        line = next(l for l in out.stdout.splitlines() if l.startswith("BENCH_RESULT "))
        return json.loads(line[len("BENCH_RESULT "):])["requests"]

    pid = target.pids()[0]
    ev = [a for s in SYSCALLS for a in ("-e", f"syscalls:sys_enter_{s}")]
    perf = subprocess.Popen(["perf", "stat", "-x,", *ev, "-e", "context-switches", "-p", str(pid),
                             "--", "sleep", str(seconds + 4)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    s0 = switches([pid])
    reqs = max(1, wrk())
    s1 = switches([pid])
    _, err = perf.communicate(timeout=seconds + 60)
    counts = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit() and int(f[0]) > 0:
            counts[f[2].replace("syscalls:sys_enter_", "")] = int(f[0]) / reqs
    counts["vcsw"] = (s1[0] - s0[0]) / reqs
    counts["ivcsw"] = (s1[1] - s0[1]) / reqs
    if profile_to:
        data = os.path.join(ctx.workdir, os.path.basename(profile_to) + ".data")
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2999", "-g",
                                "-o", data, "-C", PROXY_CORE, "--", "sleep", str(seconds)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        wrk()
        rec.wait(timeout=seconds + 60)
        comm = procfs.comm(pid)
        with open(profile_to, "w") as f:
            for children in ("--no-children", "--children"):  # self time, then inclusive
                f.write(f"## perf report {children}, comm {comm}\n")
                f.flush()
                subprocess.run(["perf", "report", "-i", data, children, "--comm", comm,
                                "--stdio", "-g", "none", "--percent-limit", "1",
                                "--sort", "dso,symbol"], stdout=f, stderr=subprocess.DEVNULL,
                               timeout=120)
        print(f"# perf data: {data}", file=sys.stderr)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--sizes", default="256k")
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--targets", default="rondel,haproxy,floor,none")
    ap.add_argument("--rondel-b", default="")
    ap.add_argument("--nginx", action="store_true")
    ap.add_argument("--pipe-bytes", type=int, default=1 << 19)
    ap.add_argument("--breakdown", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="with --breakdown: perf record -g too")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    opts = ap.parse_args()
    opts.paths = 10000
    workdir = tempfile.mkdtemp(prefix="limit38-")
    ctx = Bench(opts=opts, workdir=workdir,
                rondel_bin=os.path.join(opts.build_dir, "src", "server", "rondel"))
    floor_bin = build_floor(workdir)
    names = opts.targets.split(",")
    if opts.rondel_b:
        RondelB.baseline_bin = opts.rondel_b
        names.insert(1, "rondel-b")
    if opts.nginx:
        names.append("nginx")
    runs, bd = [], {}
    try:
        b = FloorBackends(ctx, floor_bin, 4)
        make = {"rondel": lambda: Rondel(ctx, b), "rondel-b": lambda: RondelB(ctx, b),
                "haproxy": lambda: HAProxy(ctx, b), "nginx": lambda: Nginx(ctx, b),
                "floor": lambda: Floor(ctx, floor_bin, b, opts.pipe_bytes),
                "none": lambda: NoProxy(b)}
        targets = [make[n]() for n in names]
        for rnd in range(opts.rounds):
            order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
            for size in opts.sizes.split(","):
                for t in order:
                    r = one_run(ctx, t, size, opts.duration, opts.conns, seed=rnd + 1)
                    r["round"] = rnd
                    runs.append(r)
                    print(f"# round {rnd} {size} {t.name}: {r['rps']:.0f} req/s, "
                          f"cpu {r.get('cpu_us_per_req', 0):.1f} us/req, p99 "
                          f"{r['p99_us'] / 1000:.2f} ms, core0 {r['core0_busy']:.0%} core1 "
                          f"{r['core1_busy']:.0%}, vcsw {r.get('vcsw_per_req', 0):.2f}, IPIs to core 1 "
                          f"{r['ipi1_per_req']:.2f}, "
                          f"errors {r['err_read'] + r['err_timeout'] + r['err_status']}, "
                          f"load {r['loadavg_before']}", file=sys.stderr, flush=True)
        if opts.breakdown:
            for size in opts.sizes.split(","):
                for t in targets:
                    prof = (os.path.join(HERE, "results", f"limit38-perf-{t.name}-{size}-"
                                         f"{time.strftime('%H%M%S')}.txt") if opts.profile else None)
                    bd[f"{t.name} {size}"] = breakdown(ctx, t, size, opts.breakdown, opts.conns,
                                                       prof)
        for t in targets:
            t.stop()
        b.stop()
    finally:
        ctx.registry.kill_all()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(HERE, "results", f"limit38-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"argv": sys.argv, "runs": runs, "breakdown": bd}, f, indent=1)
    report(runs, bd, names, opts.sizes.split(","), path)


def report(runs, bd, names, sizes, path):
    print(f"Raw runs: {os.path.relpath(path, ROOT)}\n")
    print("| size | target | req/s | CPU µs/req | both cores µs/req | p99 ms | vcsw/req | "
          "IPIs to core 0 / 1 per req | core0 / core1 busy | req/s ÷ HAProxy | CPU ÷ HAProxy | "
          "both cores ÷ HAProxy | p99 ÷ HAProxy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:  # every CPU on the machine (proxy, client, backends, the kernel's softirqs)
        r["system_us_per_req"] = (r["core0_busy"] + r["core1_busy"]) / max(r["rps"], 1) * 1e6
    for size in sizes:
        def m(name, key):
            xs = [r[key] for r in runs if r["target"] == name and r["size"] == size and key in r]
            return med(xs) if xs else float("nan")
        h = {k: m("haproxy", k) for k in ("rps", "cpu_us_per_req", "system_us_per_req", "p99_us")}
        for name in names:
            rs = [r for r in runs if r["target"] == name and r["size"] == size]
            if not rs:
                continue
            cpu = [r["cpu_us_per_req"] for r in rs if "cpu_us_per_req" in r]
            cpu_s = f"{med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f})" if cpu else "n/a"
            print(f"| {size} | {name} | {m(name, 'rps'):,.0f} | {cpu_s} | "
                  f"{m(name, 'system_us_per_req'):.1f} | "
                  f"{m(name, 'p99_us') / 1000:.2f} | {m(name, 'vcsw_per_req'):.2f} | "
                  f"{m(name, 'ipi0_per_req'):.2f} / {m(name, 'ipi1_per_req'):.2f} | "
                  f"{m(name, 'core0_busy'):.0%} / {m(name, 'core1_busy'):.0%} | "
                  f"{m(name, 'rps') / h['rps']:.2f} | "
                  f"{m(name, 'cpu_us_per_req') / h['cpu_us_per_req']:.2f} | "
                  f"{m(name, 'system_us_per_req') / h['system_us_per_req']:.2f} | "
                  f"{m(name, 'p99_us') / h['p99_us']:.2f} |")
    la = [r["loadavg_before"] for r in runs]
    if la:
        print(f"\nLoad average before runs: {min(la)}-{max(la)}")
    if bd:
        kinds = sorted({k for v in bd.values() for k in v if v[k] >= 0.05})
        print("\n| per request | " + " | ".join(bd) + " |")
        print("|---|" + "---|" * len(bd))
        for k in kinds:
            print(f"| {k} | " + " | ".join(f"{v.get(k, 0):.2f}" for v in bd.values()) + " |")


if __name__ == "__main__":
    main()
