"""Every family docs/metrics.md documents has samples once its feature is on, and the per-worker
metric shards add up across workers.

One rondel with two workers, active health checks, hot keys (admin top-K and replicas), a
second listener with proxy_protocol and a reload, in front of a slow backend that owns a hot key (so requests spill) and two fast ones.
Traffic runs until a scrape shows a sample for every documented family (bounded in time and
count), then:
- every documented family has at least one sample (`rondel_backend_health_checks_total` among
  them: it had none before the counters were read directly), and promtool accepts the scrape;
- the exchange histograms, merged at scrape time from both workers' shards, count exactly the
  requests served, and both workers served some (the access log's worker=N).
DNS discovery is left out (it needs a resolver). With etcd installed, a second pool discovers
its backend in etcd and the instance registers in a fleet (the discovery and fleet families);
without it those families are not expected.
"""
import json
import os
import re
import shutil
import subprocess
import threading

from test_discovery_etcd import ETCD, ETCDCTL, Etcd
from test_metrics_scrape import documented_names
from tls_certs import Certs

from harness import (SOURCE_DIR, Backend, RondelTestCase, access_records, http_get, http_request,
                     main, make_config, metric_sum, raw_exchange, scrape, wait_until)

DOC = os.path.join(SOURCE_DIR, "docs", "metrics.md")
HEALTH = "{ enabled: true, interval: 200ms, timeout: 500ms, rise: 2, fall: 3 }"
MAX_ROUNDS = 200  # traffic rounds at most (each a few hundred ms)


documented_families = documented_names  # the one parser of docs/metrics.md's tables


def families_with_samples(samples, doc):
    seen = set()
    for name, _, _ in samples:
        for suffix in ("", "_count"):
            base = name[:-len(suffix)] if suffix and name.endswith(suffix) else name
            if base in doc and (doc[base] != "histogram" or name.endswith("_count")):
                seen.add(base)
    return seen


class EveryFamilyHasSamples(RondelTestCase):
    use_dir = True

    @classmethod
    def start_backends(cls):
        cls.slow = Backend("slow", "--delay-ms", "300")
        return [cls.slow, Backend("f1"), Backend("f2")]

    @classmethod
    def config(cls):
        cls.access_log = os.path.join(cls.dir, "access.log")
        text = make_config(
            cls.backends, log={"access_log": cls.access_log},
            pool={"health_check": HEALTH, "capacity_slack": 0, "spill_memory": 0,
                  "hot_keys": "{ share: 5, min_count: 4 }"},
            extra="workers: 2\n")
        # A second listener with a PROXY protocol header stage (its families' rows).
        text = text.replace("pools:\n", "  - { name: pp, bind: 127.0.0.1:0, pool: p, "
                            "proxy_protocol: { trusted: [127.0.0.0/8] } }\npools:\n", 1)
        # A TLS listener beside the plain one, for the certificate families.
        cert, key = Certs().leaf("m", ["m.test"])
        text = text.replace("pools:\n", "  - { name: secure, bind: 127.0.0.1:0, pool: p, tls: "
                            f"{{ certificates: [ {{ cert: {cert}, key: {key} }} ] }} }}\npools:\n", 1)
        # A subset no request selects (the subset families' rows, each 0).
        text = text.replace(f"address: {cls.slow.address}",
                            f"address: {cls.slow.address}, labels: [slow]", 1)
        text = text.replace("    backends:\n", "    subsets: [{when: {header: X-Subset, value: s}, "
                            "require: [slow]}]\n    backends:\n", 1)
        # An llm_prefix pool and its listener (the inference-routing families).
        text = text.replace("pools:\n", "  - { name: llmweb, bind: 127.0.0.1:0, pool: llm }\n"
                            "pools:\n  - name: llm\n    hash_key: llm_prefix\n    load_by: prompt_size\n"
                            "    backends:\n"
                            f"      - {{ address: {cls.backends[0].address} }}\n", 1)
        cls.etcd = Etcd(cls.dir) if ETCD and ETCDCTL else None
        if cls.etcd is not None:
            # A pool discovered in etcd and a fleet of one (the discovery and fleet families).
            f2 = cls.backends[2]
            cls.etcd.ctl("put", "/rondel/pools/q/f2", json.dumps({"address": f2.address}))
            text = text.replace("pools:\n", "pools:\n  - name: q\n    discovery: { etcd: { "
                                f"endpoints: [{cls.etcd.url}], prefix: /rondel/pools/q/ }} }}\n", 1)
            text += (f"fleet: {{ etcd: {{ endpoints: [{cls.etcd.url}], "
                     "prefix: /rondel/instances/m/ }, id: m1 }\n")
        return text

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            if getattr(cls, "etcd", None) is not None:
                cls.etcd.stop()

    def test_every_documented_family_has_samples_and_worker_shards_add_up(self):
        doc = documented_families()
        self.assertGreater(len(doc), 40)
        if self.etcd is None:
            doc = {n: t for n, t in doc.items()
                   if not n.startswith(("rondel_discovery_", "rondel_fleet_"))}
        self.rondel.reload()  # the reload families
        raw_exchange(self.rondel.port, b"BAD REQUEST\r\n\r\n")  # a rejected request
        chat = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        status, _, _ = http_request(self.rondel.ports["llmweb"], "POST", "/v1/chat/completions",
                                    headers={"Content-Type": "application/json"}, body=chat)
        self.assertEqual(status, 200)  # keyed by its body (the llm_prefix families)
        hot = next(k for k in (f"/hot/{i}" for i in range(500))
                   if self.rondel.route("p", k)["owner"] == self.slow.address)
        served = [0]
        lock = threading.Lock()

        def get(path):
            status, _, _ = http_get(self.rondel.port, path, timeout=10)
            if status == 200:
                with lock:
                    served[0] += 1

        stop = threading.Event()

        def traffic():
            # Bursts on the hot key (it spills off the slow backend and gets replicas) plus
            # spread keys, each request on its own connection (so both workers get some).
            for r in range(MAX_ROUNDS):
                if stop.is_set():
                    return
                paths = [hot] * 8 + [f"/k/{r}/{i}" for i in range(4)]
                threads = [threading.Thread(target=get, args=(p,)) for p in paths]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(timeout=15)
        t = threading.Thread(target=traffic)
        t.start()
        missing = set(doc)
        try:
            def all_families():
                nonlocal missing
                _, samples, _ = scrape(self.rondel.admin_port)
                missing = set(doc) - families_with_samples(samples, doc)
                return not missing
            wait_until(all_families, timeout=60, interval=0.5,
                       what="a sample of every documented family")
        except AssertionError:
            pass  # reported below with the missing names
        finally:
            stop.set()
            t.join(timeout=60)
        self.assertEqual(missing, set(), "families without samples")

        self.rondel.wait_idle()
        text, samples, _ = scrape(self.rondel.admin_port)
        promtool = shutil.which("promtool")
        if promtool is not None:
            r = subprocess.run([promtool, "check", "metrics"], input=text.encode("utf-8"),
                               capture_output=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        for result in ("ok", "failed"):
            self.assertEqual(
                len([1 for n, l, _ in samples if n == "rondel_backend_health_checks_total"
                     and l.get("result") == result]), len(self.backends), result)

        # The merged shards: every served request observed once, whichever worker served it.
        records = access_records(self.access_log, min_count=served[0])
        workers = {rec.get("worker") for rec in records}
        self.assertTrue({"0", "1"} <= workers, workers)
        self.assertEqual(metric_sum(samples, "rondel_request_duration_seconds_count", pool="p"),
                         served[0])
        self.assertEqual(metric_sum(samples, "rondel_pick_hops_count", pool="p"), served[0])
        pairs = metric_sum(samples, "rondel_spillover_pairs_total", pool="p")
        self.assertGreater(pairs, 0)
        self.assertLessEqual(pairs, metric_sum(samples, "rondel_spillover_total", pool="p"))


if __name__ == "__main__":
    main()
