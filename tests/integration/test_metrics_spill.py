"""Spillover metrics and the routing-explain API against what the proxy actually did.

A hot key whose natural owner is a slow backend spills to its ring neighbours under concurrent
load: the spillover counters (pool total, owner -> backend pairs, per-backend spill-in) must agree
exactly with the access log, and the hot-key list must name that key with the same count.
/api/route must then predict the backend the next request for the key really goes to, both with
the owner idle and with the owner at capacity.
"""
import os
import threading

from harness import (Backend, RondelTestCase, access_records, http_get, main, make_config,
                     metric_sum, scrape, wait_until)

SLOW_MS = 1500
POOL = "p"


class SpillMetrics(RondelTestCase):
    use_dir = True
    exit_status = None  # not checked here

    @classmethod
    def start_backends(cls):
        cls.slow = Backend("slow", "--delay-ms", str(SLOW_MS))
        cls.fast = [Backend(f"fast{i}") for i in range(3)]
        cls.by_addr = {b.address: b for b in [cls.slow] + cls.fast}
        return [cls.slow] + cls.fast

    @classmethod
    def config(cls):
        cls.access = os.path.join(cls.dir, "access.log")
        # Plain bounded loads: this test counts the spill of the bare bound (docs/routing.md).
        return make_config(cls.backends, log={"access_log": cls.access},
                           pool={"capacity_slack": 0, "spill_memory": 0, "hot_keys": "{share: 0}"})

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A key whose natural owner is the slow backend.
        cls.key = None
        for i in range(500):
            k = f"/hot/{i}"
            if cls.rondel.route(POOL, k)["owner"] == cls.slow.address:
                cls.key = k
                break
        assert cls.key is not None, "no key owned by the slow backend in 500 tries"

    def _concurrent(self, n, path):
        results = []
        start = threading.Barrier(n)  # all n start together, inside the slow owner's hold

        def one():
            start.wait(timeout=20)
            try:
                status, headers, _ = http_get(self.rondel.port, path, timeout=20)
                results.append((status, headers.get("x-backend")))
            except OSError as e:
                results.append((0, str(e)))
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        return results

    def test_1_spill_counts_agree_with_access_log(self):
        _, before, _ = scrape(self.rondel.admin_port)
        base_spill = metric_sum(before, "rondel_spillover_total", pool=POOL)
        n = 24
        results = self._concurrent(n, self.key)
        self.assertEqual([s for s, _ in results], [200] * n, results)
        self.rondel.wait_idle()
        wait_until(lambda: len([r for r in access_records(self.access)
                                if r.get("target") == self.key]) >= n, timeout=5,
                   what=f"{n} access log lines")
        recs = [r for r in access_records(self.access) if r.get("target") == self.key]
        self.assertEqual(len(recs), n)
        spilled = [r for r in recs if r["owner"] != r["backend"]]
        self.assertTrue(all(r["owner"] == self.slow.address for r in recs))
        self.assertGreater(len(spilled), n // 2, "the slow owner should have shed most requests")

        _, samples, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_spillover_total", pool=POOL) - base_spill,
                         len(spilled))
        pairs = {}
        for r in spilled:
            pairs[(r["owner"], r["backend"])] = pairs.get((r["owner"], r["backend"]), 0) + 1
        for (owner, backend), count in pairs.items():
            self.assertEqual(metric_sum(samples, "rondel_spillover_pairs_total", pool=POOL,
                                        owner=owner, backend=backend), count)
        self.assertEqual(metric_sum(samples, "rondel_spillover_pairs_total", pool=POOL),
                         len(spilled))
        for b in self.backends:
            want = sum(1 for r in spilled if r["backend"] == b.address)
            self.assertEqual(metric_sum(samples, "rondel_backend_spill_in_total", pool=POOL,
                                        backend=b.address), want, b.name)
        # Hops: every spilled request passed over at least the owner.
        self.assertGreaterEqual(metric_sum(samples, "rondel_pick_hops_sum", pool=POOL),
                                len(spilled))

        # The hot-key list names the key, with its spill count, in /metrics and /api/pools.
        hot = [(l, v) for n_, l, v in samples if n_ == "rondel_hot_key_spills"]
        self.assertTrue(hot, "no hot keys exported")
        top_labels, top_value = max(hot, key=lambda x: x[1])
        self.assertEqual(top_labels["key"], self.key)
        self.assertEqual(top_labels["pool"], POOL)
        self.assertEqual(int(top_value), len(spilled))
        route = self.rondel.route(POOL, self.key)
        self.assertEqual(top_labels["hash"], route["hash"])
        pool = [p for p in self.rondel.pools()["pools"] if p["name"] == POOL][0]
        self.assertEqual(pool["hot_keys"][0]["key"], self.key)
        self.assertEqual(pool["hot_keys"][0]["count"], len(spilled))

    def test_2_route_agrees_with_actual_choice(self):
        self.rondel.wait_idle()
        # Owner idle: the owner is chosen, and the request goes there.
        route = self.rondel.route(POOL, self.key)
        self.assertEqual(route["chosen"], self.slow.address)
        self.assertEqual(route["reason"], "natural owner has room")
        status, headers, _ = http_get(self.rondel.port, self.key, timeout=10)
        self.assertEqual((status, headers["x-backend"]), (200, "slow"))

        # Owner at capacity: park one request on the slow owner, then ask and send.
        parked = threading.Thread(target=lambda: http_get(self.rondel.port, self.key, timeout=10))
        parked.start()
        try:
            def owner_busy():
                pools = self.rondel.pools()["pools"]
                p = [p for p in pools if p["name"] == POOL][0]
                b = [b for b in p["backends"] if b["id"] == self.slow.address][0]
                return b["in_flight"] == 1 and p["total_in_flight"] == 1
            wait_until(owner_busy, timeout=5, what="the owner to hold the parked request")
            route = self.rondel.route(POOL, self.key)
            self.assertEqual(route["owner"], self.slow.address)
            self.assertNotEqual(route["chosen"], self.slow.address)
            self.assertGreaterEqual(route["skipped_full"], 1)
            pref = route["preference"]
            self.assertEqual(pref[0]["id"], self.slow.address)
            self.assertEqual(pref[0]["in_flight"], 1)
            self.assertEqual(pref[0]["in_flight"], pref[0]["capacity"])
            status, headers, _ = http_get(self.rondel.port, self.key, timeout=10)
            self.assertEqual(status, 200)
            self.assertEqual(headers["x-backend"], self.by_addr[route["chosen"]].name)
        finally:
            parked.join(timeout=10)
        self.rondel.wait_idle()


if __name__ == "__main__":
    main()
