"""Routing-quality policies through the real daemon (issue "Routing quality", second half).

- With the default pool settings, a uniform load over fast backends spills at most a fifth of
  what the plain bound spills on the same backends and load (the capacity slack absorbs the
  random fluctuation of in-flight counts at 50 connections; the issue's target is 2%, which an
  idle machine meets, but the share grows with how busy the machine is).
- A hot key gets replicas: its requests spread over its first R backends of the preference
  order, /api/route and the metrics say so, and cold keys stay home.
- Spill memory keeps a spilled key on the successor it spilled to (here with a hysteresis large
  enough that the key does not return home while remembered).
- With every new knob off (capacity_slack 0, spill_memory 0, hot_keys share 0) the pick is plain
  bounded loads: no replica or sticky decisions, and a slow owner holds at most
  ceil(1.25 * n / N) requests.
Each part bounds its own time; the whole file runs in well under 60 s.
"""
import collections
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

from harness import (Backend, BackendGroup, Rondel, ScriptedBackend, http_get, main,
                     make_config, metric_sum, read_ledger, scrape, wait_until)

POOL = "p"
PLAIN = {"capacity_slack": 0, "spill_memory": 0, "hot_keys": "{share: 0}"}

LUA = r"""
local paths = tonumber(os.getenv("RT_PATHS") or "10000")
local hot = tonumber(os.getenv("RT_HOT") or "0")   -- percent of requests for /hot
local counter = 0
setup = function(thread) counter = counter + 1; thread:set("tid", counter) end
local reqs, hotreq = {}, nil
init = function(args)
  math.randomseed(12345 + (tid or 0))
  for i = 1, paths do reqs[i] = wrk.format("GET", "/obj/" .. i) end
  hotreq = wrk.format("GET", "/hot")
end
request = function()
  if hot > 0 and math.random(100) <= hot then return hotreq end
  return reqs[math.random(paths)]
end
"""


def run_wrk(port, seconds, env, connections=50):
    d = tempfile.mkdtemp(prefix="rondel-it-wrk-")
    lua = os.path.join(d, "load.lua")
    with open(lua, "w") as f:
        f.write(LUA)
    out = subprocess.run(["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds}s", "-s", lua,
                          f"http://127.0.0.1:{port}/"], env=dict(os.environ, **env),
                         capture_output=True, text=True, timeout=seconds + 30)
    return out.stdout


def ledger_by_target(backends):
    """{target: Counter(backend name -> requests)} from every backend's ledger."""
    out = collections.defaultdict(collections.Counter)
    for b in backends:
        for rec in read_ledger(b.ledger):
            out[rec[2]][b.name] += 1
    return out


def ledger_backend(name, *args):
    d = tempfile.mkdtemp(prefix="rondel-it-ledger-")
    path = os.path.join(d, "ledger.txt")
    b = Backend(name, "--ledger", path, *args)
    b.ledger = path
    return b


@unittest.skipIf(shutil.which("wrk") is None, "wrk is not installed")
class RoutingPolicies(unittest.TestCase):
    def tearDown(self):
        for r in getattr(self, "rondels", []):
            r.stop()
        for b in getattr(self, "backends", []):
            b.stop()

    def test_1_defaults_spill_at_most_a_fifth_of_the_plain_bound(self):
        # Four backend processes on two busy cores are not uniform: whichever is descheduled
        # falls behind and its keys spill, rightly (0.5% idle, 2-7% on a loaded machine). One
        # process serving all four (BackendGroup) is descheduled as a whole, so the spill left
        # is rondel's own. The reference is measured in the same test: the same backends and
        # load through the plain bound (capacity_slack 0, spill_memory 0, hot_keys share 0),
        # in alternating rounds so that both see the same machine. Measured on the shared
        # 2-core machine, idle or under stress-ng --cpu 2: defaults 0.03-0.05%, plain 9-13%.
        group = BackendGroup([f"b{i}" for i in range(4)])
        self.backends = [group]
        configs = {"defaults": None, "plain": PLAIN}
        self.rondels = []
        rondels = {}
        for name, pool in configs.items():
            rondels[name] = Rondel(make_config(group.members, pool=pool))
            self.rondels.append(rondels[name])
        for _ in range(2):
            for r in rondels.values():
                run_wrk(r.port, 2, {"RT_PATHS": "10000"})
        shares = {}
        for name, r in rondels.items():
            pool = r.pools()["pools"][0]
            routed = pool["routed"]
            total = sum(routed.values())
            self.assertGreater(total, 2000, (name, routed))
            away = routed["spill"] + routed["sticky"] + routed["all_full"] + routed["replica"]
            shares[name] = (away / total, pool["spilled"] / pool["requests"], routed)
            print(f"\nspill {name}: away {away / total:.4f} spilled "
                  f"{pool['spilled'] / pool['requests']:.4f} {routed}", flush=True)
        self.assertGreater(shares["plain"][0], 0, "the load made the plain bound spill nothing")
        for i, what in enumerate(("routed away from home", "spilled")):
            self.assertLessEqual(shares["defaults"][i], shares["plain"][i] / 5,
                                 f"{what}: defaults {shares['defaults'][2]} plain "
                                 f"{shares['plain'][2]}")
        self.assertEqual(rondels["defaults"].pools()["pools"][0]["capacity_slack"], 8)
        for r in rondels.values():
            r.wait_idle()

    def test_2_hot_key_gets_replicas_and_cold_keys_stay_home(self):
        # One process for the four backends, as in test_1: none falls behind by chance.
        d = tempfile.mkdtemp(prefix="rondel-it-ledger-")
        group = BackendGroup([f"b{i}" for i in range(4)], "--delay-ms", "10",
                             member_args=lambda n: ["--ledger", os.path.join(d, n)])
        for m in group.members:
            m.ledger = os.path.join(d, m.name)
        self.backends = [group]
        r = Rondel(make_config(group.members, pool={"hot_keys": "{max_replicas: 3}"}))
        self.rondels = [r]
        names = {b.address: b.name for b in group.members}
        seen = set()
        stop = threading.Event()

        def poll():  # the decision actually taken for /hot, as /api/route reports it
            while not stop.is_set():
                try:
                    seen.add(r.route(POOL, "/hot")["last_decision"])
                except OSError:
                    pass
                stop.wait(0.02)
        t = threading.Thread(target=poll)
        t.start()
        try:
            run_wrk(r.port, 4, {"RT_PATHS": "2000", "RT_HOT": "30"})
        finally:
            stop.set()
            t.join(5)
        route = r.route(POOL, "/hot")
        self.assertEqual(route["replicas"], 3, route)
        replica_set = [names[b["id"]] for b in route["preference"][:3]]
        by_target = ledger_by_target(group.members)
        hot = by_target["/hot"]
        self.assertEqual(set(hot), set(replica_set), hot)  # exactly its first 3 backends
        self.assertGreater(min(hot.values()), sum(hot.values()) // 20, hot)
        self.assertIn("replica", seen)
        # Cold keys: served by one backend each, except a small spill.
        cold = [c for t, c in by_target.items() if t != "/hot"]
        served = sum(sum(c.values()) for c in cold)
        off_home = sum(sum(c.values()) - max(c.values()) for c in cold)
        print(f"\nhot key: {dict(hot)}; cold keys off home {off_home / served:.4f}", flush=True)
        # 10 ms backends in one process keep ~50 requests in flight whatever the scheduler
        # does, so the cold spill is a sampling quantity (measured: docs/reliability.md).
        self.assertLess(off_home / served, 0.02)
        _, samples, _ = scrape(r.admin_port)
        self.assertGreater(metric_sum(samples, "rondel_routed_requests_total", pool=POOL,
                                      reason="replica"), 0)
        self.assertEqual(metric_sum(samples, "rondel_hot_key_replicas", pool=POOL, key="/hot"), 3)
        self.assertGreaterEqual(metric_sum(samples, "rondel_hot_keys_replicated", pool=POOL), 1)
        r.wait_idle()

    def _burst_on_slow_owner(self, pool_keys, n=24):
        slow = ledger_backend("slow", "--delay-ms", "1200")
        fast = [ledger_backend(f"fast{i}") for i in range(3)]
        self.backends = [slow] + fast
        r = Rondel(make_config(self.backends, pool=pool_keys))
        self.rondels = [r]
        key = next(k for k in (f"/k/{i}" for i in range(1000))
                   if r.route(POOL, k)["owner"] == slow.address)
        results = []

        def one():
            try:
                results.append(http_get(r.port, key, timeout=20)[0])
            except OSError as e:
                results.append(str(e))
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(results, [200] * n)
        r.wait_idle()
        return r, slow, fast, key

    def test_3_spill_memory_keeps_a_spilled_key_on_one_successor(self):
        # One spill made on purpose, then nothing else: home (a scripted backend) holds one
        # request until released, which fills it (cap ceil(1.25 * 2 / 4) = 1 with
        # capacity_slack 0), and the key is sent once. (A burst of 24 at a 1.2 s backend left the
        # memory in a state that depended on the order the requests arrived and finished in:
        # the last pick that found its remembered successor full and home free erased it.)
        home_seen = collections.Counter()
        release = threading.Event()

        def home_handler(method, target, head, body):
            home_seen[target] += 1
            if target.startswith("/hold/"):
                release.wait(15)
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False

        slow = ScriptedBackend(home_handler)
        fast = [ledger_backend(f"fast{i}") for i in range(3)]
        self.backends = [slow] + fast
        r = Rondel(make_config([{"address": slow.address}] + fast,
                               pool={"capacity_slack": 0, "spill_hysteresis": 1000,
                                     "hot_keys": "{share: 0}"}))
        self.rondels = [r]
        key, holder = (next(t for t in (f"/{p}/{i}" for i in range(1000))
                            if r.route(POOL, t)["owner"] == slow.address)
                       for p in ("k", "hold"))

        def served():  # {backend name: requests for key}
            out = ledger_by_target(fast)[key]
            out["slow"] = home_seen[key]
            return +out
        held = threading.Thread(target=http_get, args=(r.port, holder), kwargs={"timeout": 20})
        held.start()
        try:
            wait_until(lambda: home_seen[holder] == 1, what="home holding one request")
            self.assertEqual(http_get(r.port, key)[0], 200)
        finally:
            release.set()
            held.join(20)
        r.wait_idle()
        before = served()
        self.assertEqual(list(before.values()), [1], before)
        self.assertNotIn("slow", before)
        # Home is idle again, but the remembered spill keeps the key on one successor.
        for _ in range(10):
            self.assertEqual(http_get(r.port, key)[0], 200)
        after = served()
        moved = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        self.assertEqual(moved, {next(iter(before)): 10})
        self.assertEqual(r.route(POOL, key)["last_decision"], "sticky")

    def test_4_all_knobs_off_is_plain_bounded_loads(self):
        n = 24
        r, slow, fast, key = self._burst_on_slow_owner(PLAIN, n)
        cap = -(-125 * n // (100 * 4))  # ceil(1.25 * n / 4): the most the owner may ever hold
        self.assertLessEqual(slow.stats()["max_in_flight"], cap)
        pool = r.pools()["pools"][0]
        self.assertEqual(pool["routed"]["replica"] + pool["routed"]["sticky"], 0, pool)
        self.assertEqual(pool["hot_replicas"], [])
        # Idle again: the key goes home (no memory of the spill).
        for _ in range(3):
            self.assertEqual(http_get(r.port, key)[1].get("x-backend"), "slow")
        route = r.route(POOL, key)
        self.assertEqual((route["decision"], route["last_decision"]), ("home", "home"))
        # The bound is the plain formula: at idle every backend's capacity is ceil(1.25/4) = 1.
        self.assertEqual([b["capacity"] for b in route["preference"]], [1, 1, 1, 1])


if __name__ == "__main__":
    main()
