"""A real Prometheus server (started by hand on 127.0.0.1, own temp storage, scrape_interval 1s)
scrapes rondel's admin listener while a hot key spills; queries through its HTTP API return the
spillover series with the values rondel itself reports.
"""
import shutil
import threading
import time
import unittest

from harness import (Backend, Prometheus, Rondel, http_get, main, make_config, metric_sum,
                     scrape, wait_until)


@unittest.skipIf(shutil.which(Prometheus.BIN) is None,
                 "prometheus not installed (Debian package prometheus)")
class RealPrometheus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.slow = Backend("slow", "--delay-ms", "400")
        cls.backends = [cls.slow, Backend("f1"), Backend("f2")]
        cls.rondel = Rondel(make_config(cls.backends))
        cls.prom = Prometheus([f"127.0.0.1:{cls.rondel.admin_port}"], interval="1s")

    @classmethod
    def tearDownClass(cls):
        cls.prom.stop()
        cls.rondel.stop()
        for b in cls.backends:
            b.stop()

    def test_spillover_series_reach_prometheus(self):
        wait_until(lambda: any(r["value"][1] == "1" for r in self.prom.query('up{job="rondel"}')),
                   timeout=15, interval=0.25, what="prometheus to scrape rondel (up == 1)")
        key = next(k for k in (f"/hot/{i}" for i in range(500))
                   if self.rondel.route("p", k)["owner"] == self.slow.address)
        # Hot traffic: waves of 10 concurrent requests on one key owned by the slow backend (400
        # ms each), started together at a barrier, until rondel has counted a spill: the bound
        # lets at most 5 of 10 sit on one of 3 backends, so a wave whose requests overlap spills.
        # On a loaded machine the threads of one wave may not overlap; another wave follows (at
        # most 10), so the test waits on the counter, not on the scheduler.
        requests = 0
        spilled = 0
        for _ in range(10):
            barrier = threading.Barrier(10)

            def hot_get():
                barrier.wait(timeout=10)
                http_get(self.rondel.port, key, timeout=10)
            threads = [threading.Thread(target=hot_get) for _ in range(10)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=15)
            requests += 10
            self.rondel.wait_idle()
            _, samples, _ = scrape(self.rondel.admin_port)
            spilled = metric_sum(samples, "rondel_spillover_total", pool="p")
            if spilled > 0:
                break
        self.assertGreater(spilled, 0)

        def caught_up():
            r = self.prom.query('rondel_spillover_total{pool="p"}')
            return r if r and float(r[0]["value"][1]) == spilled else None
        result = wait_until(caught_up, timeout=15, interval=0.25,
                            what="prometheus to see the spillover total")
        self.assertEqual(result[0]["metric"]["job"], "rondel")

        pairs = self.prom.query('sum by (owner, backend) (rondel_spillover_pairs_total{pool="p"})')
        self.assertTrue(pairs)
        self.assertEqual({p["metric"]["owner"] for p in pairs}, {self.slow.address})
        self.assertEqual(sum(float(p["value"][1]) for p in pairs), spilled)

        hot = self.prom.query('topk(1, rondel_hot_key_spills{pool="p"})')
        self.assertEqual(hot[0]["metric"]["key"], key)

        # A histogram survives the round trip too (the last slow requests may land a scrape later).
        wait_until(lambda: [r for r in self.prom.query(
            'sum(rondel_request_duration_seconds_count{pool="p"})') if float(r["value"][1]) == requests],
            timeout=10, interval=0.25, what=f"prometheus to count all {requests} requests")

    def test_dashboard_queries_evaluate(self):
        import json
        import os
        from harness import SOURCE_DIR
        with open(os.path.join(SOURCE_DIR, "conf", "grafana", "rondel-dashboard.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        exprs.append(dash["annotations"]["list"][0]["expr"])
        for e in exprs:
            q = (e.replace("$__rate_interval", "5s").replace("$__range", "1m")
                 .replace("$pool", ".*"))
            self.prom.query(q)  # raises on a query Prometheus rejects


if __name__ == "__main__":
    main()
