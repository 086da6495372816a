"""The admin listener's /metrics: `promtool check metrics` accepts a scrape, the families served
are exactly those docs/metrics.md documents, label sets stay bounded, and the admin endpoints
answer 404/405 as specified and never show file paths.
"""
import os
import re
import shutil
import subprocess
import threading

from harness import (SOURCE_DIR, Backend, RondelTestCase, http_get, http_request, main, make_config,
                     metric_sum, scrape)

DOC = os.path.join(SOURCE_DIR, "docs", "metrics.md")
SUFFIXES = ("_bucket", "_sum", "_count")


def documented_names():
    names = {}
    with open(DOC) as f:
        for line in f:
            m = re.match(r"^\| `(rondel_[a-z0-9_]+)` \| (counter|gauge|histogram) \|", line)
            if m:
                names[m.group(1)] = m.group(2)
    return names


class Scrape(RondelTestCase):
    use_dir = True
    exit_status = None  # not checked here

    @classmethod
    def start_backends(cls):
        return [Backend("b0", "--delay-ms", "300"), Backend("b1"), Backend("b2")]

    @classmethod
    def config(cls):
        return make_config(cls.backends, log={"access_log": os.path.join(cls.dir, "access.log")},
                           pool={"hash_key": "header:X-Key", "points_per_weight": 160,
                                 "capacity_slack": 0, "spill_memory": 0,
                                 "hot_keys": "{share: 0}"})

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Traffic: spread keys, plus a burst on one (UTF-8) key owned by the slow backend, so
        # that it spills and shows up as a hot key.
        for i in range(30):
            http_get(cls.rondel.port, f"/k/{i}", headers={"X-Key": f"k{i}"})
        cls.hot = next(k for k in (f"burst\u00e9{i}" for i in range(300))
                       if cls.rondel.route("p", k)["owner"] == cls.backends[0].address)
        wire = cls.hot.encode("utf-8").decode("latin-1")  # http.client sends header values as latin-1
        start = threading.Barrier(12)  # the burst starts together, inside the slow one's hold

        def one():
            start.wait(timeout=20)
            http_get(cls.rondel.port, "/burst", headers={"X-Key": wire})
        threads = [threading.Thread(target=one) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        http_get(cls.rondel.port, "/" + "x" * 200)
        cls.rondel.reload()  # a reload, so the reload families have samples
        cls.text, cls.samples, cls.types = scrape(cls.rondel.admin_port)

    def test_promtool_check_metrics(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool not installed (Debian package prometheus)")
        r = subprocess.run([promtool, "check", "metrics"], input=self.text.encode("utf-8"),
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())

    def test_served_families_match_the_doc(self):
        doc = documented_names()
        self.assertGreater(len(doc), 30)
        self.assertEqual(set(self.types), set(doc),
                         "docs/metrics.md and /metrics disagree")
        for name, kind in doc.items():
            self.assertEqual(self.types[name], kind, name)
        # Every sample belongs to a documented family.
        for name, _, _ in self.samples:
            base = name
            for s in SUFFIXES:
                if name.endswith(s) and name[:-len(s)] in doc:
                    base = name[:-len(s)]
            self.assertIn(base, doc, name)

    def test_dashboard_uses_documented_metrics(self):
        import json
        with open(os.path.join(SOURCE_DIR, "conf", "grafana", "rondel-dashboard.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 20)
        doc = documented_names()
        used = set()
        for e in exprs:
            for name in re.findall(r"\b(rondel_[a-z0-9_]+)", e):
                base = next((name[:-len(s)] for s in SUFFIXES
                             if name.endswith(s) and name[:-len(s)] in doc), name)
                self.assertIn(base, doc, e)
                used.add(base)
        # The dashboard plots every documented family.
        self.assertEqual(set(doc) - used, set())

    def test_values_are_consistent(self):
        self.assertEqual(metric_sum(self.samples, "rondel_build_info"), 1)
        self.assertEqual(metric_sum(self.samples, "rondel_config_generation"), 2)
        self.assertEqual(metric_sum(self.samples, "rondel_reloads_total", result="ok"), 1)
        self.assertEqual(metric_sum(self.samples, "rondel_reload_moved_key_share", pool="p"), 0)
        self.assertEqual(metric_sum(self.samples, "rondel_pool_requests_total", pool="p"), 43)
        self.assertEqual(metric_sum(self.samples, "rondel_requests_total", pool="p"), 43)
        self.assertEqual(metric_sum(self.samples, "rondel_request_duration_seconds_count"), 43)
        self.assertAlmostEqual(metric_sum(self.samples, "rondel_backend_key_share", pool="p"), 1,
                               places=6)
        self.assertAlmostEqual(metric_sum(self.samples, "rondel_backend_weight_share"), 1,
                               places=6)
        self.assertEqual(metric_sum(self.samples, "rondel_ring_points", pool="p"), 3 * 160)
        self.assertEqual(metric_sum(self.samples, "rondel_ring_memory_bytes", pool="p"),
                         3 * 160 * 6)
        for b in self.backends:
            self.assertEqual(metric_sum(self.samples, "rondel_backend_state", pool="p",
                                        backend=b.address, state="up"), 1)
            self.assertEqual(metric_sum(self.samples, "rondel_backend_in_flight", pool="p",
                                        backend=b.address), 0)
            self.assertGreaterEqual(metric_sum(self.samples, "rondel_backend_capacity", pool="p",
                                               backend=b.address), 1)
        spilled = metric_sum(self.samples, "rondel_spillover_total", pool="p")
        self.assertGreater(spilled, 0)
        self.assertEqual(metric_sum(self.samples, "rondel_spillover_pairs_total", pool="p"),
                         spilled)
        self.assertGreater(metric_sum(self.samples, "rondel_client_received_bytes_total"), 0)
        self.assertGreater(metric_sum(self.samples, "rondel_backend_received_bytes_total"), 0)
        # The hot key label is the (valid UTF-8) key itself.
        keys = {l["key"] for n, l, _ in self.samples if n == "rondel_hot_key_spills"}
        self.assertIn(self.hot, keys)

    def test_label_cardinality_is_bounded(self):
        per_family = {}
        for name, labels, _ in self.samples:
            per_family.setdefault(name, set()).add(tuple(sorted(labels.items())))
        n = len(self.backends)
        for name, sets in per_family.items():
            # Per-backend families: at most 5 classes x 3 states x buckets per backend.
            self.assertLessEqual(len(sets), n * n + n * 20, name)
        hot = [l for name, l, _ in self.samples if name == "rondel_hot_key_spills"]
        self.assertLessEqual(len(hot), 10)  # admin.hot_keys default

    def test_admin_http_semantics(self):
        port = self.rondel.admin_port
        self.assertEqual(http_get(port, "/nope")[0], 404)
        self.assertEqual(http_get(port, "/metrics/extra")[0], 404)
        self.assertEqual(http_request(port, "POST", "/metrics", body=b"x")[0], 405)
        self.assertEqual(http_request(port, "DELETE", "/api/pools")[0], 405)
        status, headers, body = http_request(port, "HEAD", "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        self.assertGreater(int(headers["content-length"]), 1000)
        status, headers, _ = http_get(port, "/metrics")
        self.assertTrue(headers["content-type"].startswith("text/plain; version=0.0.4"))
        self.assertEqual(http_get(port, "/api/route?pool=nope&key=x")[0], 400)
        self.assertEqual(http_get(port, "/api/ring?pool=nope")[0], 400)

    def test_no_paths_or_secrets_in_admin_output(self):
        port = self.rondel.admin_port
        for path in ["/metrics", "/api/pools", "/api/route?pool=p&key=/k/1", "/api/ring?pool=p",
                     "/ui", "/healthz", "/readyz"]:
            status, _, body = http_get(port, path)
            self.assertEqual(status, 200, path)
            text = body.decode("utf-8")
            self.assertNotIn(self.dir, text, path)
            self.assertNotIn("rondel.yaml", text, path)
            self.assertNotIn("access.log", text, path)


if __name__ == "__main__":
    main()
