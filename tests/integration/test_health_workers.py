"""Health with `workers: 2` (issue 13: health by source, defect 9's cross-thread races).

Both workers see the same backend health: passive ejections made by either worker count against
one max_ejected_percent limit, and the pool's unusable count matches the backends' states; an
active check takes a backend out and brings it back on both workers, while slow start ramps its
weight on the daemon tick and both workers keep picking. Every active check result is counted in
rondel_backend_health_checks_total. The TSan step of .ci/run runs this file under
ThreadSanitizer, where these are the paths that cross threads.
"""
import os
import tempfile
import threading
import unittest

from harness import (Backend, Rondel, access_records, http_get, main, make_config, metric_sum,
                     scrape, wait_until)
from test_workers import parallel_gets


def states(rondel):
    return {b["id"]: b["state"] for b in rondel.pools()["pools"][0]["backends"]}


def keys_of(rondel, backend, n, prefix):
    out = []
    for i in range(3000):
        k = f"/{prefix}/{i}"
        if rondel.route("p", k)["owner"] == backend.address:
            out.append(k)
            if len(out) == n:
                break
    return out


class HealthTwoWorkers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-health-workers-")
        self.access = os.path.join(self.dir, "access.log")
        self.backends = []
        self.rondel = None

    def tearDown(self):
        if self.rondel is not None:
            self.assertEqual(self.rondel.stop(), 0)
        for b in self.backends:
            b.stop()

    def start(self, pool):
        self.rondel = Rondel(make_config(self.backends, pool=pool, log={"access_log": self.access},
                                         extra="workers: 2\n"), workdir=self.dir)
        self.assertTrue(self.rondel.lines(r"info started .*workers=2"))

    def test_ejection_limit_holds_over_both_workers(self):
        good = [Backend(f"g{i}") for i in range(4)]
        bad = [Backend(f"x{i}", "--fail-mode", "status-500") for i in range(4)]
        self.backends = good + bad
        self.start({"passive_health":
                    "{ consecutive_failures: 1, ejection_time: 60s, max_ejected_percent: 25 }",
                    "retries": 0})
        paths = [k for b in bad for k in keys_of(self.rondel, b, 6, "e")]
        self.assertEqual(len(paths), 24)
        # Short connections at once: the kernel spreads them over both workers' listeners, and
        # every bad backend gets failures from both while the first ejections happen.
        for _ in range(3):
            statuses = parallel_gets(self.rondel.port, paths)
            self.assertEqual(sorted(set(statuses) - {200, 500}), [], statuses)
        recs = access_records(self.access, timeout=5, min_count=len(paths) * 3)
        self.assertEqual({r.get("worker") for r in recs}, {"0", "1"})
        # An ejection happens before the failing response is forwarded: the states are final.
        st = states(self.rondel)
        ejected = [b.name for b in bad if st[b.address] == "ejected"]
        self.assertEqual(len(ejected), 2, st)  # 25% of 8, whichever workers raced for it
        self.assertTrue(all(st[b.address] == "up" for b in good), st)
        self.assertEqual(len(self.rondel.lines(r"warn backend_ejected pool=p ")), 2)
        _, samples, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_pool_unusable_backends", pool="p"), 2)
        self.rondel.wait_idle()

    def test_check_down_and_up_with_slow_start_while_both_workers_pick(self):
        self.backends = [Backend(f"b{i}") for i in range(3)]
        victim = self.backends[1]
        self.start({"health_check": "{ enabled: true, interval: 100ms, timeout: 500ms, rise: 2, "
                    "fall: 2 }", "slow_start": "1s", "balance_factor": 125})
        keys = keys_of(self.rondel, victim, 20, "s")
        wait_until(lambda: set(states(self.rondel).values()) == {"up"}, timeout=5,
                   what="all backends up")
        failures = []
        stop = threading.Event()

        def traffic():
            i = 0
            while not stop.is_set() and i < 20000:  # bounded: stops with the test anyway
                i += 1
                status, headers, _ = http_get(self.rondel.port, keys[i % len(keys)])
                if status != 200:
                    failures.append((status, headers.get("x-backend")))

        threads = [threading.Thread(target=traffic, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            http_get(victim.port, "/_health?fail=1")
            wait_until(lambda: states(self.rondel)[victim.address] == "down", timeout=5,
                       interval=0.05, what="victim down by checks")
            _, samples, _ = scrape(self.rondel.admin_port)
            self.assertEqual(metric_sum(samples, "rondel_pool_unusable_backends", pool="p"), 1)
            start = self.rondel.out.count()
            http_get(victim.port, "/_health?fail=0")
            wait_until(lambda: states(self.rondel)[victim.address] == "up", timeout=5,
                       interval=0.05, what="victim up again")
            self.rondel.out.wait_for(rf"info backend_up pool=p backend={victim.address}",
                                     timeout=2, start=start)
            # Its keys come back to it on both workers while its weight ramps up.
            served = lambda: {r.get("worker") for r in access_records(self.access)  # noqa: E731
                              if r.get("backend") == victim.address}
            wait_until(lambda: served() == {"0", "1"}, timeout=5, what="both workers using it")
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=15)
        self.assertEqual(failures, [])
        _, samples, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_pool_unusable_backends", pool="p"), 0)
        name = "rondel_backend_health_checks_total"
        self.assertGreaterEqual(metric_sum(samples, name, backend=victim.address, result="failed"),
                                2)
        self.assertGreaterEqual(metric_sum(samples, name, backend=victim.address, result="ok"), 2)
        self.assertEqual(metric_sum(samples, name, backend=self.backends[0].address,
                                    result="failed"), 0)
        self.rondel.wait_idle()


if __name__ == "__main__":
    main()
