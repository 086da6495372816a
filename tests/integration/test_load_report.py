"""Backend-reported load through the real daemon (issue 17, part 1).

- Health checks poll reports out of band: with no request through rondel, the check's response
  tells it the backend holds 2 requests (sent there directly).
- Reports are read from every response (rondel-test-backend --report-load): accepted ones set
  the backend's reported load, malformed, NaN, negative, absurd and metric-less ones are ignored
  and counted by reason, and the metrics say so.
- A fleet of 3 rondel instances in front of 8 test backends (100 ms each), Zipf 1.1 keys,
  traffic split 60/30/10 between the instances (closed-loop wrk connections 96/48/16), default
  capacity slack (8): the global in-flight max/mean, sampled at the backends, is lower with
  reports than without, in the same run (the two fleets take turns on the same backends).
  Without reports each instance adds its own slack above its own fair share, so the owner of a
  hot key may hold three slacks above the pool's fair share; with reports one. The same fleet
  told its size (`fleet: {instances: 3}`, no reports) holds the pool's cap: max/cap 0.95-1.01
  measured here (the test allows 1.10)
  and below the unsized fleet's (issue 37).
  False failures: measured here 1.76 without and 1.44 with reports (means over thousands of
  samples each, one sample = max over the 8 backends of in_flight / their mean; p95 2.05 and
  1.56), a gap of 0.3 against a run-to-run spread of a few hundredths (1.74-1.81 and
  1.42-1.45 in four runs); the test fails only if
  reports stop reaching the bound. RONDEL_FLEET_SECONDS (default 2) and RONDEL_FLEET_ROUNDS
  (default 1: one turn per fleet) set the length; RONDEL_FLEET_SLACK, _SCALE, _DELAY_MS, _AGE
  vary the setup, RONDEL_FLEET_SINGLE=1 adds a one-instance reference fleet, and
  RONDEL_FLEET_DEFAULTS=1 keeps the daemon's default spill memory and hot-key replicas
  (docs/routing.md).
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (BackendGroup, HttpConn, Rondel, http_get, main, make_config, metric_sum,
                     scrape, wait_until)

POOL = "p"
# The default capacity slack (8), no spill memory, no hot-key replicas: the cap alone decides.
SLACK = int(os.environ.get("RONDEL_FLEET_SLACK", "8"))
PLAIN = {"capacity_slack": SLACK, "spill_memory": 0, "hot_keys": "{share: 0}"}
# RONDEL_FLEET_DEFAULTS=1: the daemon's default spill memory and hot-key replicas instead.
if os.environ.get("RONDEL_FLEET_DEFAULTS", "0") == "1":
    PLAIN = {"capacity_slack": SLACK}
REPORTS = {**PLAIN, "load_report": "{max_age: %s}" % os.environ.get("RONDEL_FLEET_AGE", "200ms")}
REPORTS_UP = {**PLAIN, "load_report": "{max_age: %s, rounding: up}"
              % os.environ.get("RONDEL_FLEET_AGE", "200ms")}
N_BACKENDS = 8
SCALE = int(os.environ.get("RONDEL_FLEET_SCALE", "8"))
SPLIT = (12 * SCALE, 6 * SCALE, 2 * SCALE)  # wrk connections per instance: 60/30/10
DELAY_MS = os.environ.get("RONDEL_FLEET_DELAY_MS", "100")
TURN_S = int(os.environ.get("RONDEL_FLEET_SECONDS", "2"))
ROUNDS = int(os.environ.get("RONDEL_FLEET_ROUNDS", "1"))
# RONDEL_FLEET_SINGLE=1 adds a reference turn: one rondel, without reports, taking all the
# connections, i.e. the pool-wide bound held exactly (what reports aim at).
SINGLE = os.environ.get("RONDEL_FLEET_SINGLE", "0") == "1"
# RONDEL_FLEET_N_REPORTS=1 adds a turn with reports and `fleet: {instances: 3}` together, and
# one more with `rounding: up` (every place below the cap taken; docs/routing.md).
FLEET_N_REPORTS = os.environ.get("RONDEL_FLEET_N_REPORTS", "0") == "1"
# The shared-counts fleet's interval (`fleet: {peers, share_load}`).
SHARE_LOAD = os.environ.get("RONDEL_FLEET_SHARE_LOAD", "20ms")

# Zipf(1.1) over RT_KEYS keys, by inverse CDF (binary search), one seed per wrk thread.
LUA = r"""
local n = tonumber(os.getenv("RT_KEYS") or "10000")
local seed = tonumber(os.getenv("RT_SEED") or "1")
local cdf, reqs = {}, {}
init = function(args)
  math.randomseed(seed)
  local sum = 0
  for i = 1, n do sum = sum + i ^ -1.1; cdf[i] = sum end
  for i = 1, n do cdf[i] = cdf[i] / sum; reqs[i] = wrk.format("GET", "/zipf/" .. i) end
end
request = function()
  local u, lo, hi = math.random(), 1, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return reqs[lo]
end
"""


def start_wrk(port, conns, seconds, lua, seed):
    env = dict(os.environ, RT_KEYS="10000", RT_SEED=str(seed))
    return subprocess.Popen(["wrk", "-t", "1", "-c", str(conns), "-d", f"{int(seconds)}s", "-s", lua,
                             f"http://127.0.0.1:{port}/"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def pool_cap(total, n, bf=125, slack=SLACK):
    """core::capacity for equal weights: max(1, ceil(bf * (total + 1) / (100 n))), and with a
    slack at least ceil((total + 1) / n) + slack."""
    cap = max(1, -(-(bf * (total + 1)) // (100 * n)))
    return max(cap, -(-(total + 1) // n) + slack) if slack else cap


class Sampler:
    """Polls every backend's /_stats in_flight (keep-alive) until stopped; keeps, per sample
    with something in flight, max/mean, max/cap of the pool-wide cap and the share of the
    requests in flight above that cap (sum of max(0, in_flight_i - cap) / total)."""

    def __init__(self, ports):
        self.conns = [HttpConn(p, timeout=10) for p in ports]
        self.ratios, self.over_cap, self.above = [], [], []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_flag.is_set():
            loads = []
            for c in self.conns:
                c.request("GET", "/_stats")
                status, _, body = c.read_response()
                loads.append(int(body.split(b'"in_flight":')[1].split(b",")[0]))
            total = sum(loads)
            if total > 0:
                self.ratios.append(max(loads) * len(loads) / total)
                cap = pool_cap(total - 1, len(loads))
                self.over_cap.append(max(loads) / cap)
                self.above.append(sum(max(0, x - cap) for x in loads) / total)

    def close(self):
        for c in self.conns:
            c.close()


@unittest.skipIf(shutil.which("wrk") is None, "wrk is not installed")
class LoadReport(unittest.TestCase):
    def tearDown(self):
        for r in getattr(self, "rondels", []):
            r.stop()
        for b in getattr(self, "backends", []):
            b.stop()

    def test_1_reports_are_read_and_bad_ones_counted_by_reason(self):
        group = BackendGroup(["r0"], "--report-load", "colon")
        self.backends = [group]
        r = Rondel(make_config(group.members, pool={"load_report": "{}"}))
        self.rondels = [r]
        m = "named_metrics.in_flight"
        cases = {"ok": f"{m}:3", "not_finite": f"{m}:nan", "negative": f"{m}:-1",
                 "too_large": f"{m}:5e6", "missing": "cpu_utilization:0.5",
                 "malformed": f"{m}:3,,x"}
        for reason, value in cases.items():
            status, _, _ = http_get(r.port, f"/k?load={value}")
            self.assertEqual(status, 200, reason)
        # The last one accepted said 3; a later bad one does not change it.
        text, samples, _ = scrape(r.admin_port)
        for reason in cases:
            self.assertEqual(metric_sum(samples, "rondel_backend_load_reports_total",
                                        result=reason), 1, reason)
        self.assertEqual(metric_sum(samples, "rondel_backend_reported_load"), 3)
        # A plain request reports the true count (0: nothing else in flight) and is accepted.
        http_get(r.port, "/k")
        _, samples, _ = scrape(r.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_backend_load_reports_total", result="ok"), 2)
        self.assertEqual(metric_sum(samples, "rondel_backend_reported_load"), 0)

    def test_3_health_checks_poll_reports_without_traffic(self):
        # Out-of-band polling: the health check's response carries a report too, so a backend
        # that gets no request from this instance is still seen (here: 2 held by others).
        group = BackendGroup(["h0"], "--report-load", "json")
        self.backends = [group]
        r = Rondel(make_config(group.members, pool={
            "load_report": "{}",
            "health_check": "{enabled: true, path: /healthz, interval: 50ms, timeout: 1s}"}))
        self.rondels = [r]
        held = [HttpConn(group.port, timeout=10) for _ in range(2)]
        try:
            for c in held:  # two requests held at the backend, not through rondel
                c.request("GET", "/slow?delay=5000")

            def reported():
                _, samples, _ = scrape(r.admin_port)
                ok = metric_sum(samples, "rondel_backend_load_reports_total", result="ok")
                return ok > 0 and metric_sum(samples, "rondel_backend_reported_load") == 2
            wait_until(reported, timeout=10, what="a polled report of 2")
            self.assertEqual(r.pools()["pools"][0]["requests"], 0)
        finally:
            for c in held:
                c.close()

    def test_2_fleet_with_reports_has_lower_global_max_over_mean(self):
        names = [f"b{i}" for i in range(N_BACKENDS)]
        group = BackendGroup(names, "--delay-ms", DELAY_MS, "--report-load", "text",
                             "--cache-objects", "400")
        self.backends = [group]
        # The same fleets told their size (`fleet: {instances: 3}`): each counts its requests
        # three times, so the slack is granted once across the fleet.
        sized = {"fleet": "{instances: %d}" % len(SPLIT)}
        modes = [("local", PLAIN, SPLIT, None), ("reports", REPORTS, SPLIT, None),
                 ("local_n", PLAIN, SPLIT, sized)]
        if FLEET_N_REPORTS:
            modes.append(("reports_n", REPORTS, SPLIT, sized))
            modes.append(("reports_n_up", REPORTS_UP, SPLIT, sized))
        if SINGLE:
            modes.append(("single", PLAIN, (sum(SPLIT),), None))
        # The same fleet as a fixed list of peers reading each other's in-flight counts every
        # 20 ms (`share_load`): the bound compares the fleet's own counts.
        modes.append(("shared", PLAIN, SPLIT, "shared"))
        fleets = {mode: [Rondel(make_config(group.members, pool=pool, top=top, admin=admin))
                         for top, admin in self.fleet_tops(top, len(split))]
                  for mode, pool, split, top in modes}
        splits = {mode: split for mode, _, split, _ in modes}
        self.rondels = [r for f in fleets.values() for r in f]
        # The N each sized instance scales by, exported; the unsized ones export none.
        _, samples, _ = scrape(fleets["local_n"][0].admin_port)
        self.assertEqual(metric_sum(samples, "rondel_fleet_instances"), 3)
        _, samples, _ = scrape(fleets["local"][0].admin_port)
        self.assertFalse([n for n, _, _ in samples if n == "rondel_fleet_instances"])
        lua = os.path.join(tempfile.mkdtemp(prefix="rondel-it-fleet-"), "zipf.lua")
        with open(lua, "w") as f:
            f.write(LUA)
        result = {mode: {"ratios": [], "over_cap": [], "above": [], "hits": 0, "misses": 0}
                  for mode in fleets}
        # The shared fleet sends its members its counts every interval even when idle: it is
        # stopped (SIGSTOP) outside its own turns, so that it takes no CPU from the others'.
        # Resumed, it may find its health checks timed out (a minute went by): each of its
        # turns waits until every member sees every backend up and the shared counts fresh.
        self.pause(fleets["shared"], signal.SIGSTOP)
        for turn in range(ROUNDS):
            for mode, fleet in fleets.items():
                if mode == "shared":
                    self.pause(fleet, signal.SIGCONT)
                    if os.environ.get("DEBUG_TURN"):
                        print("RESUMED", [[b["state"] for b in r.pools()["pools"][0]["backends"]]
                                          for r in fleet], flush=True)
                    wait_until(lambda: all(
                        json.loads(http_get(r.admin_port, "/api/fleet")[2])["load"]["fresh"] and
                        all(b["state"] == "up" for b in r.pools()["pools"][0]["backends"])
                        for r in fleet), timeout=30, interval=0.02, what="shared fleet ready")
                self.run_turn(group, fleet, splits[mode], lua, result[mode], seed=turn * 10)
                if mode == "shared":
                    self.pause(fleet, signal.SIGSTOP)
        self.pause(fleets["shared"], signal.SIGCONT)
        summary = {}
        for mode, res in result.items():
            pools = [r.pools()["pools"][0] for r in fleets[mode]]
            requests = sum(p["requests"] for p in pools)
            spilled = sum(p["spilled"] for p in pools)
            self.assertGreater(len(res["ratios"]), 20, mode)
            summary[mode] = {
                "samples": len(res["ratios"]),
                "max_over_mean": statistics.fmean(res["ratios"]),
                "max_over_mean_p95": sorted(res["ratios"])[int(0.95 * len(res["ratios"]))],
                "max_over_cap": statistics.fmean(res["over_cap"]),
                "above_cap": statistics.fmean(res["above"]),
                "spill": spilled / max(1, requests),
                "miss": res["misses"] / max(1, res["hits"] + res["misses"]),
                "requests": requests}
            print(f"\nfleet {mode}: " + ", ".join(
                f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in summary[mode].items()), flush=True)
        self.assertLess(summary["reports"]["max_over_mean"], summary["local"]["max_over_mean"],
                        summary)
        # Told N, per-instance bounds no longer add up above the pool's cap (1.18-1.24 without).
        self.assertLess(summary["local_n"]["max_over_cap"], 1.10, summary)
        self.assertLess(summary["local_n"]["max_over_cap"], summary["local"]["max_over_cap"],
                        summary)
        # With shared counts the fleet holds the cap too, and no longer over-spills: the 60%
        # instance, which counts its own requests 3 times told N alone, sees the true counts
        # (spill 16.6% told N against 10.8% for one balancer at slack 8, docs/routing.md).
        self.assertLess(summary["shared"]["max_over_cap"], 1.10, summary)
        if SLACK > 0:
            self.assertLess(summary["shared"]["spill"], summary["local_n"]["spill"], summary)
        for r in self.rondels:
            r.wait_idle()

    @staticmethod
    def pause(fleet, sig):
        for r in fleet:
            r.proc.send_signal(sig)

    @staticmethod
    def fleet_tops(top, n):
        """[(top-level keys, admin)] for each of n instances: as given, or for "shared" a fixed
        fleet of n peers on free admin ports of 127.0.0.1 sharing their counts."""
        if top != "shared":
            return [(top, True)] * n
        socks = [socket.socket() for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in socks]
        for s in socks:
            s.close()
        peers = ", ".join(f"{{ id: m{i}, admin: '127.0.0.1:{p}' }}" for i, p in enumerate(ports))
        return [({"fleet": f"{{ peers: [{peers}], id: m{i}, share_hot_keys: false, "
                           f"share_load: {SHARE_LOAD} }}"}, {"bind": f"127.0.0.1:{p}"})
                for i, p in enumerate(ports)]

    def run_turn(self, group, fleet, split, lua, res, seed):
        for m in group.members:
            group.reset(m.port)
        sampler = Sampler([m.port for m in group.members])
        procs = [start_wrk(r.port, c, TURN_S, lua, seed + i)
                 for i, (r, c) in enumerate(zip(fleet, split))]
        # Sample once every instance's load has reached the backends (the first response).
        wait_until(lambda: all(r.pools()["pools"][0]["requests"] > 0 for r in fleet), timeout=10)
        sampler.thread.start()
        for p in procs:
            out, _ = p.communicate(timeout=TURN_S + 30)
            self.assertEqual(p.returncode, 0, out)
        sampler.stop_flag.set()
        sampler.thread.join(timeout=10)
        sampler.close()
        res["ratios"] += sampler.ratios
        res["over_cap"] += sampler.over_cap
        res["above"] += sampler.above
        for m in group.members:
            st = group.stats(m.port)
            res["hits"] += st["hits"]
            res["misses"] += st["misses"]


if __name__ == "__main__":
    main()
