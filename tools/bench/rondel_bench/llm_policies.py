"""The routing policies of the inference-routing benchmark (tools/bench/llm.sh), one row each:
how to start it in front of kvsim's servers, where the driver sends its requests, which pids
are the proxy (for its CPU), and its spill share where it exposes one."""

import json
import os
import subprocess

from rondel_support import config, daemons, metrics
from rondel_support.httpio import http_get

from .proxies import haproxy_conf, start_held

# json_query reads the body HAProxy buffered (option http-buffer-request waits for the whole
# body or a full buffer): the whole prompt must fit in one buffer, tune.bufsize. The traces'
# largest prompts are about 40 KB (shared) and 107 KB (Mooncake); 256 KiB leaves room.
HAPROXY_BUFSIZE = 262144
# A waiting request's stream stays silent until its first token: the proxies' inactivity
# timeouts must outlast the worst queue of a saturated policy.
LONG = "600s"


class Started:
    """A policy running: targets [(host, port)] for the driver, the proxy's pids, stop()."""

    def __init__(self, targets, pids, stop, spill=None):
        self.targets, self.pids, self._stop, self._spill = targets, pids, stop, spill

    def spill_share(self):
        return self._spill() if self._spill else None

    def stop(self):
        self._stop()


def _haproxy(ctx, name, balance, factor, kvsim_ports):
    d = os.path.join(ctx.workdir, name)
    os.makedirs(d, exist_ok=True)
    servers = [(f"s{i}", p) for i, p in enumerate(kvsim_ports)]
    extra_defaults = ("    option http-buffer-request\n"
                      f"    timeout server {LONG}\n    timeout client {LONG}\n")
    extra_global = f"    tune.bufsize {HAPROXY_BUFSIZE}\n"

    def argv_for(held):
        text = haproxy_conf(f"fd@{held.fd}", servers, balance, factor, maxconn="8000",
                            extra_defaults=extra_defaults, extra_global=extra_global)
        path = os.path.join(d, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(text)
        return [ctx.haproxy, "-f", path], None

    proc, port = start_held(ctx.registry, argv_for, (), os.path.join(d, "stderr.log"), name)
    return Started([("127.0.0.1", port)], [proc.pid], lambda: ctx.registry.stop(proc))


def _rondel_config(kvsim_ports, pool, top=None):
    keys = {"backend_io_timeout": LONG, "response_header_timeout": LONG, **pool}
    return config.make_config([{"address": f"127.0.0.1:{p}", "id": f"s{i}"}
                               for i, p in enumerate(kvsim_ports)], pool=keys, top=top)


def rondel_rejects(ctx, pool):
    """None when `rondel -c` accepts a pool with these keys, else its first error line."""
    text = _rondel_config([1, 2], pool)
    path = os.path.join(ctx.workdir, "check.yaml")
    config.write_file(path, text)
    out = subprocess.run([ctx.rondel, "-c", "-f", path], capture_output=True, text=True)
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else f"exit {out.returncode}"


def _rondel(ctx, pool, instances, kvsim_ports, top=None):
    text = _rondel_config(kvsim_ports, pool, top)
    daemons_ = []
    for i in range(instances):
        d = os.path.join(ctx.workdir, f"rondel{i}")
        os.makedirs(d, exist_ok=True)
        daemons_.append(daemons.Rondel(text, binary=ctx.rondel, registry=ctx.registry, workdir=d))

    def spill():
        spilled = requests = 0.0
        for r in daemons_:
            _, samples, _ = metrics.scrape(r.admin_port)
            spilled += metrics.metric_sum(samples, "rondel_spillover_total")
            requests += metrics.metric_sum(samples, "rondel_pool_requests_total")
        return spilled / requests if requests else None

    def stop():
        for r in daemons_:
            r.stop()
    return Started([("127.0.0.1", r.port) for r in daemons_], [r.pid for r in daemons_], stop,
                   spill if pool.get("hash_key") not in (None, "header:X-Kvsim-None") else None)


def _oracle(ctx, kvsim):
    def spill():
        stats = json.loads(http_get(kvsim.ports[0], "/stats", timeout=10)[2])
        o = stats["oracle"]
        return o["spills"] / o["requests"] if o["requests"] else None
    return Started([("127.0.0.1", kvsim.oracle_port)], [], lambda: None, spill)


# name, label, how to start (ctx, kvsim) -> Started, rondel pool keys to check first (or None).
NO_KEY = {"hash_key": "header:X-Kvsim-None"}


def policies(json_path, speedup=1.0):
    """The policy rows; json_path: HAProxy's json_query path of the first user message; speedup:
    the trace's time compression, by which rondel's hot-key window (a wall-clock duration, 60 s
    by default under llm_prefix) is divided so that it spans the same model time."""
    hap_hash = f"hash req.body,json_query('{json_path}')"
    window_ms = max(10, round(60000 / speedup))
    llm = {"hash_key": "llm_prefix", "hot_keys": f"{{window: {window_ms}ms}}"}
    llm_prompt = {**llm, "load_by": "prompt_size"}
    llm_hashed = {**llm, "llm_prefix": "{tenant_homes: hashed}"}
    # kvsim's ORCA header: KV-cache use 0..1, as a load of 0..1000.
    llm_orca = {**llm, "load_report":
                "{metric: named_metrics.kv_cache_utilization, scale: 1000}"}
    return [
        ("round_robin", "round robin (HAProxy roundrobin)",
         lambda ctx, k: _haproxy(ctx, "haproxy-rr", "roundrobin", None, k.ports), None),
        ("least_in_flight", "least in flight (rondel, no key)",
         lambda ctx, k: _rondel(ctx, {**NO_KEY, "missing_key": "least_in_flight"}, 1, k.ports),
         None),
        ("random", "random (rondel, no key)",
         lambda ctx, k: _rondel(ctx, {**NO_KEY, "missing_key": "random"}, 1, k.ports), None),
        ("haproxy_json", f"HAProxy json_query {json_path}, factor 125",
         lambda ctx, k: _haproxy(ctx, "haproxy-json", hap_hash, 125, k.ports), None),
        ("oracle", "oracle (kvsim: least backlog + 3 x added prefill, bounded)",
         lambda ctx, k: _oracle(ctx, k), None),
        ("rondel_llm_1", "rondel llm_prefix, 1 instance",
         lambda ctx, k: _rondel(ctx, llm, 1, k.ports), llm),
        ("rondel_llm_4", "rondel llm_prefix, 4 instances",
         lambda ctx, k: _rondel(ctx, llm, 4, k.ports), llm),
        ("rondel_llm_4_fleet", "rondel llm_prefix, 4 instances told N (fleet: {instances: 4})",
         lambda ctx, k: _rondel(ctx, llm, 4, k.ports, {"fleet": "{instances: 4}"}), llm),
        ("rondel_llm_hashed_1", "rondel llm_prefix, tenant_homes hashed, 1 instance",
         lambda ctx, k: _rondel(ctx, llm_hashed, 1, k.ports), llm_hashed),
        ("rondel_llm_hashed_4", "rondel llm_prefix, tenant_homes hashed, 4 instances",
         lambda ctx, k: _rondel(ctx, llm_hashed, 4, k.ports), llm_hashed),
        ("rondel_llm_orca", "rondel llm_prefix, load_report kv_cache_utilization, 1 instance",
         lambda ctx, k: _rondel(ctx, llm_orca, 1, k.ports), llm_orca),
        ("rondel_llm_prompt", "rondel llm_prefix, load_by prompt_size, 1 instance",
         lambda ctx, k: _rondel(ctx, llm_prompt, 1, k.ports), llm_prompt),
    ]
