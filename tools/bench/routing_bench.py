#!/usr/bin/env python3
"""Routing-quality benchmark through the real daemons: rondel vs HAProxy vs nginx.

Same backends, same workload, same run: 4 rondel-test-backend processes modelling an LRU cache
(--cache-objects, --miss-delay-ms; /_stats counts hits and misses), 10,000 keys (/obj/1..N),
wrk with 50 connections, uniform or Zipf-skewed keys. For each proxy configuration and balance
factor: reset every backend (counters and cache), warm up, then measure; report max/avg of
requests per backend, the miss rate seen by the backends, throughput and latency, and for
rondel the routing decisions by reason (/api/pools) and the peak in-flight / capacity seen by a
sampler. Results go to a JSON file; docs/routing.md shows them (tools/plots/
routing_daemon_curves.py draws the figures).

Everything listens on 127.0.0.1; every process this script starts is stopped by pid at the end.
Daemons are started by hand with generated configuration files, never as services.

Usage: tools/bench/routing_bench.py --rondel BUILD/src/server/rondel
          --backend BUILD/tools/test_backend/rondel-test-backend --out results.json
          [--workloads uniform,zipf] [--factors 110,125,150,200] [--warmup 4] [--duration 8]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading



HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "pylib")]
from rondel_bench.context import LUA, log  # noqa: E402
from rondel_bench.proxies import haproxy_conf, nginx_conf, start_held  # noqa: E402
from rondel_support import config, daemons, ports  # noqa: E402
from rondel_support.httpio import http_get  # noqa: E402
from rondel_support.procfs import loadavg  # noqa: E402
from rondel_support.procs import ProcessRegistry  # noqa: E402


def get_json(port, path):
    return json.loads(http_get(port, path, timeout=5.0)[2])


class Backends:
    """4 rondel-test-backend processes (b0..b3) modelling an LRU cache, on port 0 each."""

    def __init__(self, binary, registry, n, delay_ms, cache_objects, miss_delay_ms):
        flags = ["--cache-objects", str(cache_objects), "--miss-delay-ms", str(miss_delay_ms)]
        if delay_ms:
            flags += ["--delay-ms", str(delay_ms)]
        self.backends = [daemons.TestBackend(f"b{i}", *flags, binary=binary, registry=registry)
                         for i in range(n)]
        self.ports = [b.port for b in self.backends]

    def reset(self):
        for b in self.backends:
            b.reset()

    def stats(self):
        return [b.stats() for b in self.backends]

    def stop(self):
        for b in self.backends:
            b.stop()


# ------------------------------------------------------------------------------ proxies

def rondel_conf(ports_, factor, plain, extra):
    """rondel on port 0 (and its admin), pool p: hash_key uri, balance_factor `factor`;
    plain: every routing-quality knob off; extra: "key: value" pool lines (--rondel-key)."""
    pool = {"hash_key": "uri", "balance_factor": factor}
    if plain:  # every routing-quality knob off: plain bounded loads on the same placement
        pool.update({"capacity_slack": 0, "spill_memory": 0, "hot_keys": "{share: 0}"})
    else:
        pool.update(line.split(": ", 1) for line in extra)
    # Stable ids (as an operator would give): placement does not depend on the ephemeral ports.
    backends = [{"address": f"127.0.0.1:{p}", "id": f"b{i}"} for i, p in enumerate(ports_)]
    return config.make_config(backends, pool=pool, top={"workers": 1, "drain_timeout": "1s"},
                              admin={"enabled": "true"}, log={"access_log": "", "level": "info"})


class Proxy:
    def __init__(self, kind, factor, ports_, workdir, args, registry):
        self.kind, self.factor = kind, factor
        self.admin_port = None
        self.daemon = None
        d = os.path.join(workdir, f"{kind}-{factor}")
        os.makedirs(d, exist_ok=True)
        self.registry = registry
        self.sig = signal.SIGTERM
        if kind in ("rondel", "rondel-plain"):
            self.daemon = daemons.Rondel(
                rondel_conf(ports_, factor, kind == "rondel-plain", args.rondel_key),
                binary=args.rondel, registry=registry, workdir=d)
            self.proc, self.port, self.admin_port = self.daemon.proc, self.daemon.port, self.daemon.admin_port
            return
        if kind == "haproxy":
            def argv_for(held):
                conf = haproxy_conf(f"fd@{held.fd}", ((f"b{i}", p) for i, p in enumerate(ports_)),
                                    "uri whole", factor=factor)
                return ["haproxy", "-db", "-f", config.write_file(os.path.join(d, "haproxy.cfg"), conf)], None
        elif kind == "nginx":
            self.sig = signal.SIGQUIT

            def argv_for(held):
                path = config.write_file(os.path.join(d, "nginx.conf"), nginx_conf(held.port, ports_, d))
                return (["nginx", "-p", d, "-e", f"{d}/error.log", "-c", path],
                        ports.nginx_inherit_env([held]))
        else:
            raise ValueError(kind)
        self.proc, self.port = start_held(registry, argv_for, (), os.path.join(d, "stderr.txt"), kind)

    def pools(self):
        return get_json(self.admin_port, "/api/pools")["pools"][0]

    def stop(self):
        self.registry.stop(self.proc, self.sig)


class Sampler(threading.Thread):
    """Polls rondel's /api/pools during a run: the peak in-flight count of any backend.

    Whether a pick ever exceeded its cap is not sampled (caps shrink as the total falls, so a
    later snapshot proves nothing): the daemon counts every pick that found all backends full
    (routed all_full), the only case where a backend is given a request at or above its cap.
    """

    def __init__(self, proxy):
        super().__init__(daemon=True)
        self.proxy, self.halt = proxy, threading.Event()
        self.samples = 0
        self.peak_in_flight = 0

    def run(self):
        while not self.halt.is_set():
            try:
                pool = self.proxy.pools()
            except OSError:
                break
            self.samples += 1
            for b in pool["backends"]:
                self.peak_in_flight = max(self.peak_in_flight, b["in_flight"])
            self.halt.wait(0.02)


def wrk(url, lua, seconds, zipf, keys, connections, threads, seed, mode="random"):
    env = dict(os.environ, BENCH_PATHS=str(keys), BENCH_ZIPF=str(zipf), BENCH_SEED=str(seed),
               BENCH_MODE=mode, BENCH_THREADS=str(threads))
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
                          "--timeout", "10s", "-s", lua, url], env=env, capture_output=True,
                         text=True, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            r = json.loads(line[len("BENCH_RESULT "):])
            r["errors"] = sum(r[k] for k in ("err_connect", "err_read", "err_write", "err_status",
                                             "err_timeout"))
            return r
    raise RuntimeError("wrk printed no result: " + out.stdout + out.stderr)


def measure(kind, factor, backends, args, workload, workdir, lua, registry):
    zipf = 1.1 if workload == "zipf" else 0
    proxy = Proxy(kind, factor, backends.ports, workdir, args, registry)
    try:
        backends.reset()
        url = f"http://127.0.0.1:{proxy.port}/"
        # Prime: every key once (the measured window should see capacity and spill misses,
        # not the compulsory first fetch of a Zipf tail key), then a random warm-up.
        wrk(url, lua, args.prime, zipf, args.keys, args.connections, args.threads, args.seed,
            mode="sweep")
        wrk(url, lua, args.warmup, zipf, args.keys, args.connections, args.threads, args.seed)
        before = backends.stats()
        pb = proxy.pools() if proxy.admin_port else None
        sampler = Sampler(proxy) if proxy.admin_port else None
        if sampler:
            sampler.start()
        load0 = loadavg()
        w = wrk(url, lua, args.duration, zipf, args.keys, args.connections, args.threads,
                args.seed + 1)
        if sampler:
            sampler.halt.set()
            sampler.join()
        after = backends.stats()
        pa = proxy.pools() if proxy.admin_port else None
    finally:
        proxy.stop()
    req = [a["requests"] - b["requests"] for a, b in zip(after, before)]
    miss = [a["misses"] - b["misses"] for a, b in zip(after, before)]
    total = sum(req)
    row = {
        "proxy": kind, "workload": workload, "balance_factor": factor,
        "requests": total, "rps": w["requests"] / (w["duration_us"] / 1e6),
        "wrk_errors": w["errors"], "p50_ms": w["p50_us"] / 1000, "p99_ms": w["p99_us"] / 1000,
        "per_backend": req, "misses_per_backend": miss,
        "req_max_over_avg": max(req) / (total / len(req)) if total else 0,
        "miss_rate": sum(miss) / total if total else 0, "loadavg": load0,
    }
    if pa:
        routed = {k: pa["routed"][k] - pb["routed"][k] for k in pa["routed"]}
        n = sum(routed.values())
        row["routed"] = routed
        row["spill"] = (pa["spilled"] - pb["spilled"]) / n if n else 0
        row["overflow"] = (routed["spill"] + routed["sticky"] + routed["all_full"]) / n if n else 0
        row["replica"] = routed["replica"] / n if n else 0
        row["hot_replicas"] = pa.get("hot_replicas", [])
        row["peak_in_flight"] = sampler.peak_in_flight
        row["all_full"] = routed["all_full"]
        shares = [b["key_share"] for b in pa["backends"]]
        row["key_share_max_over_avg"] = max(shares) * len(shares) / sum(shares)
    log(f"{workload:8s} {kind:13s} {factor:4d}: max/avg {row['req_max_over_avg']:.3f} "
        f"miss {100 * row['miss_rate']:.3f}% rps {row['rps']:.0f} "
        + (f"spill {100 * row['spill']:.2f}% replica {100 * row['replica']:.2f}% "
           f"all_full {row['all_full']} peak in-flight {row['peak_in_flight']} "
           f"key-share max/avg {row['key_share_max_over_avg']:.3f}" if pa else "")
        + f" load {load0}")
    return row


def main():
    # SIGTERM/SIGINT unwind through the finally blocks, which stop every process started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rondel", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default="uniform,zipf")
    ap.add_argument("--factors", default="110,125,150,200")
    ap.add_argument("--proxies", default="haproxy,nginx,rondel,rondel-plain")
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prime", type=int, default=3, help="seconds of the key sweep")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--cache-objects", type=int, default=3000)
    ap.add_argument("--miss-delay-ms", type=int, default=2)
    ap.add_argument("--zipf-delay-ms", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rondel-key", action="append", default=[],
                    help="extra pool line for the rondel series, e.g. 'hot_keys: {share: 5}'")
    args = ap.parse_args()
    registry = ProcessRegistry()
    factors = [int(f) for f in args.factors.split(",")]
    proxies = args.proxies.split(",")
    results = {"command": " ".join(sys.argv), "loadavg_start": loadavg(), "nproc": os.cpu_count(),
               "versions": {}, "runs": []}
    for tool, flag in (("haproxy", "-v"), ("nginx", "-v"), ("wrk", "-v")):
        r = subprocess.run([tool, flag], capture_output=True, text=True)
        results["versions"][tool] = (r.stdout + r.stderr).splitlines()[0] if (r.stdout + r.stderr) else ""
    workdir = tempfile.mkdtemp(prefix="rondel-routing-bench-")
    lua = LUA  # tools/bench/load.lua, the one wrk script of the benchmarks
    try:
        for workload in args.workloads.split(","):
            delay = args.zipf_delay_ms if workload == "zipf" else 0
            backends = Backends(args.backend, registry, 4, delay, args.cache_objects,
                                args.miss_delay_ms)
            try:
                for kind in proxies:
                    for factor in ([0] if kind == "nginx" else factors):
                        results["runs"].append(measure(kind, factor, backends, args, workload,
                                                       workdir, lua, registry))
            finally:
                backends.stop()
    finally:
        registry.stop_all()
    results["loadavg_end"] = loadavg()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
