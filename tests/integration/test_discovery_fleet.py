"""Self-registration: the fleet knows N (issue 36).

Three rondel instances with `fleet: {etcd: {prefix: /rondel/instances/c1/}}` and a real etcd:
each keeps its key under a lease (TTL 2 s here) with its placement fingerprint per pool, and
watches the prefix. Each then exports N = 3 and every instance's fingerprint; an instance whose
placement differs (a reload with another weight) is flagged by the majority check within 2 s; an
instance that stops leaves the fleet when its lease runs out.
"""
import json
import tempfile
import time
import unittest

from harness import Backend, Rondel, http_get, main, metric_sum, scrape, wait_until
from test_discovery_etcd import ETCD, ETCDCTL, Etcd

FLEET = "/rondel/instances/c1/"


@unittest.skipIf(ETCD is None or ETCDCTL is None, "etcd is not installed (etcd-server etcd-client)")
class Fleet(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-it-fleet-")
        self.etcd = Etcd(self.dir)
        self.backends = [Backend("f1"), Backend("f2")]
        self.rondels = [Rondel(self.config(f"r{i}")) for i in (1, 2, 3)]

    def tearDown(self):
        for r in self.rondels:
            if r.proc.poll() is None:
                self.assertEqual(r.stop(), 0)
        for b in self.backends:
            b.stop()
        self.etcd.stop()

    def config(self, name, weight=1):
        return ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                f"    backends: [{{ address: {self.backends[0].address}, weight: {weight} }}, "
                f"{{ address: {self.backends[1].address} }}]\n"
                f"fleet: {{ etcd: {{ endpoints: [{self.etcd.url}], prefix: {FLEET} }}, id: {name},"
                " ttl: 2s, retry: 200ms }\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")

    def metrics(self, r):
        return scrape(r.admin_port)[1]

    def instances(self, r):
        return metric_sum(self.metrics(r), "rondel_fleet_instances")

    def fingerprints(self, r):
        """{instance: fingerprint} of pool p, as instance r sees the fleet."""
        out = {}
        for name, labels, _ in self.metrics(r):
            if name == "rondel_fleet_placement_fingerprint" and labels.get("pool") == "p":
                out[labels["instance"]] = labels["fingerprint"]
        return out

    def test_n_fingerprints_majority_and_leaving(self):
        wait_until(lambda: all(self.instances(r) == 3 for r in self.rondels), timeout=10,
                   interval=0.05, what="every instance seeing 3")
        own = self.rondels[0].pools()["pools"][0]["fingerprint"]
        for r in self.rondels:
            m = self.metrics(r)
            self.assertEqual(metric_sum(m, "rondel_fleet_registered"), 1)
            self.assertEqual(metric_sum(m, "rondel_fleet_disagrees", pool="p"), 0)
            self.assertEqual(self.fingerprints(r), {"r1": own, "r2": own, "r3": own})
        # The key itself: the instance's record under its lease.
        out = self.etcd.ctl("get", FLEET + "r2", "--print-value-only")
        self.assertEqual(json.loads(out), {"id": "r2", "fingerprints": {"p": own}})

        # r3 reloads to another placement: the majority flags it, the others do not.
        self.rondels[2].reload(self.config("r3", weight=2))
        changed = time.monotonic()
        other = self.rondels[2].pools()["pools"][0]["fingerprint"]
        self.assertNotEqual(other, own)
        wait_until(lambda: metric_sum(self.metrics(self.rondels[2]), "rondel_fleet_disagrees",
                                      pool="p") == 1, timeout=5, interval=0.02,
                   what="r3 flagged")
        wait_until(lambda: self.fingerprints(self.rondels[0]).get("r3") == other, timeout=5,
                   interval=0.02, what="r1 seeing r3's new fingerprint")
        flagged = time.monotonic() - changed
        self.assertEqual(metric_sum(self.metrics(self.rondels[0]), "rondel_fleet_disagrees",
                                    pool="p"), 0)
        # /api/fleet says the same: N, the members' fingerprints, the majority and who differs.
        doc = json.loads(http_get(self.rondels[2].admin_port, "/api/fleet")[2])
        self.assertEqual((doc["id"], doc["instances"], doc["registered"]), ("r3", 3, True))
        self.assertEqual({m["id"]: m["fingerprints"]["p"] for m in doc["members"]},
                         {"r1": own, "r2": own, "r3": other})
        self.assertEqual(doc["pools"], [{"pool": "p", "fingerprint": other, "majority": own,
                                         "disagrees": True}])

        # r2 stops: it leaves when its lease (2 s) runs out.
        self.assertEqual(self.rondels[1].stop(), 0)
        stopped = time.monotonic()
        wait_until(lambda: self.instances(self.rondels[0]) == 2, timeout=10, interval=0.05,
                   what="r2 gone from the fleet")
        left = time.monotonic() - stopped
        print(f"\nfleet: r3's new fingerprint flagged and seen in {flagged:.3f}s; "
              f"a stopped instance left after {left:.3f}s (lease TTL 2 s)")
        self.assertLess(flagged, 2.0)
        self.assertLess(left, 2.0 + 2.0)
        # The others keep their leases alive (a keep-alive every third of the TTL): more than a
        # TTL later they are still there.
        time.sleep(2.5)
        self.assertEqual(self.instances(self.rondels[0]), 2)
        self.assertEqual(self.instances(self.rondels[2]), 2)


if __name__ == "__main__":
    main()
