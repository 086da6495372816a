"""Load: wrk with tools/bench/load.lua, one measured run with the CPU, core, IPI and memory
figures around it, and the alternation of proxies that every pass with reps uses."""

import json
import os
import subprocess
import time

from rondel_support import procfs
from rondel_support.procfs import CLK_TCK

from .context import CLIENT_CORE, LUA, PROXY_CORE
from .proxies import HAProxy, Nginx, NoProxy, Rondel


def run_wrk(ctx, url, duration, zipf, mode="random", seed=1, conns=None, core=CLIENT_CORE,
            delay_ms=None, lua=LUA, lua_env=None):
    """wrk -t1 for `duration` s on `url`; load.lua's BENCH_RESULT as a dict.
    delay_ms: each connection waits that long after a response before its next request
    (load.lua's delay(); wrk's latency does not include the wait), which caps the request rate
    at about conns / (delay + latency) whatever the target.
    lua, lua_env: another wrk script (it prints the same BENCH_RESULT line) and the extra
    environment it reads (the large-body pass: bodies.lua, BENCH_SIZES)."""
    opts = ctx.opts
    env = dict(os.environ, BENCH_PATHS=str(opts.paths), BENCH_ZIPF=str(zipf),
               BENCH_MODE=mode, BENCH_SEED=str(seed))
    if delay_ms:
        env["BENCH_DELAY_MS"] = str(delay_ms)
    env.update(lua_env or {})
    argv = ctx.prefix(core) + ["wrk", "-t1", f"-c{conns or opts.conns}", f"-d{duration}s",
                               "--timeout", "2s", "-s", lua, url]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=duration + 30)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return json.loads(line[len("BENCH_RESULT "):])
    raise RuntimeError(f"wrk gave no result: {out.stdout}\n{out.stderr}")


def _cpu_figures(r, busy_s, wall, pinned, backend_ticks, ipis):
    """Adds the core (pinned) or machine (unpinned) busy figures to wrk's result `r`."""
    n = max(1, r["requests"])
    if pinned:
        r["core0_busy"] = busy_s[0] / wall
        r["core1_busy"] = busy_s[1] / wall
        r["core0_us_per_req"] = busy_s[0] * 1e6 / n
        r["core1_us_per_req"] = busy_s[1] * 1e6 / n
        r["backends_us_per_req"] = backend_ticks / CLK_TCK * 1e6 / n
        i0, i1 = ipis
        for k in i0:  # IPIs received per 1,000 requests, e.g. "RES1": to the client core
            r[f"ipi_{k}_per_1k"] = (i1[k] - i0[k]) * 1000 / n
    else:
        r["machine_busy"] = busy_s[0] / wall / os.cpu_count()
        r["machine_us_per_req"] = busy_s[0] * 1e6 / n


def measured_run(ctx, target, zipf, duration, seed, pinned=True, backend_pids=(), conns=None,
                 delay_ms=None, lua=LUA, lua_env=None):
    """One warm-up, then one measured wrk run with the target's CPU time around it.
    pinned: wrk on CLIENT_CORE; busy time of PROXY_CORE and CLIENT_CORE (core0_*, core1_*), and
    what the client core spends per request: the backends' CPU (backend_pids) and the rest (wrk,
    interrupts), with the wake-up IPIs each core received.
    Unpinned (the workers pass): wrk on any core; busy time of the whole machine instead
    (machine_busy: share of all cores; machine_us_per_req). lua, lua_env: as in run_wrk."""
    script = {"lua": lua, "lua_env": lua_env}
    wrk_core = CLIENT_CORE if pinned else None
    cores = (PROXY_CORE, CLIENT_CORE) if pinned else (None,)
    run_wrk(ctx, target.url(), 1, zipf, seed=seed + 1000, core=wrk_core, conns=conns,
            delay_ms=delay_ms, **script)
    la = procfs.loadavg()
    pids = target.pids()
    t0 = procfs.cpu_ticks(pids) if pids else 0
    n0 = procfs.nonvoluntary_switches(pids) if pids else 0
    b0 = [procfs.core_busy_ticks(c) for c in cores]
    bk0 = procfs.cpu_ticks(backend_pids)
    i0 = procfs.ipi_counts()
    w0 = time.time()
    r = run_wrk(ctx, target.url(), duration, zipf, seed=seed, core=wrk_core, conns=conns,
                delay_ms=delay_ms, **script)
    wall = time.time() - w0
    i1 = procfs.ipi_counts()
    bk1 = procfs.cpu_ticks(backend_pids)
    t1 = procfs.cpu_ticks(pids) if pids else 0
    n1 = procfs.nonvoluntary_switches(pids) if pids else 0
    busy_s = [(y - x) / CLK_TCK for x, y in zip(b0, [procfs.core_busy_ticks(c) for c in cores])]
    _cpu_figures(r, busy_s, wall, pinned, bk1 - bk0, (i0, i1))
    r["loadavg"] = la
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    r["errors"] = sum(r[k] for k in ("err_connect", "err_read", "err_write", "err_status", "err_timeout"))
    if pids:
        cpu_s = (t1 - t0) / CLK_TCK
        r["cpu_us_per_req"] = cpu_s * 1e6 / max(1, r["requests"])
        r["cpu_busy"] = cpu_s / wall
        r["rss_kib"] = procfs.hwm_kib(pids)
        if pinned:  # /proc/PID/status counts the main thread only: meaningless with 2 threads
            r["preempted_per_s"] = (n1 - n0) / wall
    return r


def alternating(ctx, make_backends, workloads):
    """Yields (rep, workload, zipf, proxy, backends) for rondel, HAProxy, nginx and no proxy in
    turn, on each (workload, zipf), opts.reps times, so drift hits all alike; stops them all
    when the caller is done (or fails)."""
    b = make_backends()
    proxies = []
    try:
        proxies = [Rondel(ctx, b), HAProxy(ctx, b), Nginx(ctx, b), NoProxy(b)]
        for rep in range(ctx.opts.reps):
            for wl, zipf in workloads:
                for p in proxies:
                    yield rep, wl, zipf, p, b
    finally:
        for p in proxies:
            p.stop()
        b.stop()
