"""The fleet on Kubernetes: the ready endpoints of the instance's own Service (issue 36 item 3).

`fleet: {kubernetes: {service, namespace, port, server, token_file}}` follows the EndpointSlices
of the Service the rondel instances belong to, with the same list/watch as Kubernetes discovery,
served here by test_discovery_k8s's FakeApiServer. N is the number of ready endpoints, the
members are named by targetRef.name, and this instance (id rondel-1) is registered while its own
endpoint is ready. EndpointSlices carry no fingerprint, so the fleet knows only its own: the
metrics and /api/fleet say so, and no instance is flagged. A failing API server keeps the last N.
"""
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

from harness import RONDEL_BIN, Backend, Rondel, http_get, main, metric_sum, scrape, wait_until
from test_discovery_k8s import NS, SERVICE, FakeApiServer, endpoint, would_see_a_connection

PODS = {"rondel-0": "10.0.0.10", "rondel-1": "10.0.0.11", "rondel-2": "10.0.0.12"}
SELF = "rondel-1"


def endpoints(not_ready=(), terminating=()):
    return [endpoint(ip, pod, ready=pod not in not_ready and pod not in terminating,
                     serving=pod not in not_ready, terminating=pod in terminating)
            for pod, ip in PODS.items()]


class K8sFleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-fleet-k8s-")
        cls.backend = Backend("b1")
        token_file = os.path.join(cls.dir, "token")
        with open(token_file, "w") as f:
            f.write("t0k3n\n")
        cls.api = FakeApiServer(0, "t0k3n")
        cls.api.set_slice("rondel-x1", endpoints(), port=8080)
        text = ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                f"pools:\n  - name: p\n    backends: [{{ address: {cls.backend.address} }}]\n"
                "fleet:\n"
                f"  kubernetes: {{ service: {SERVICE}, namespace: {NS}, port: http, "
                f"server: http://127.0.0.1:{cls.api.port}, token_file: {token_file} }}\n"
                f"  id: {SELF}\n  retry: 200ms\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")
        cls.rondel = Rondel(text, workdir=cls.dir)

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        cls.api.stop()
        cls.backend.stop()
        assert code == 0, code

    def setUp(self):
        self.api.failing = False
        self.api.set_slice("rondel-x1", endpoints(), port=8080)
        wait_until(lambda: self.instances() == 3, timeout=5, interval=0.05, what="N = 3")
        wait_until(lambda: self.api.watching() == 1, timeout=5, what="rondel watching")

    def metrics(self):
        return scrape(self.rondel.admin_port)[1]

    def instances(self):
        return metric_sum(self.metrics(), "rondel_fleet_instances")

    def fleet(self):
        status, _, body = http_get(self.rondel.admin_port, "/api/fleet")
        self.assertEqual(status, 200)
        return json.loads(body)

    def test_n_members_and_only_its_own_fingerprint(self):
        m = self.metrics()
        self.assertEqual(metric_sum(m, "rondel_fleet_instances"), 3)
        self.assertEqual(metric_sum(m, "rondel_fleet_registered"), 1)
        own = self.rondel.pools()["pools"][0]["fingerprint"]
        fps = [(l["pool"], l["instance"], l["fingerprint"]) for n, l, _ in m
               if n == "rondel_fleet_placement_fingerprint"]
        self.assertEqual(fps, [("p", SELF, own)])
        # Unknown, so absent: not a 0 that would claim the fleet agrees.
        self.assertFalse([n for n, _, _ in m if n == "rondel_fleet_disagrees"])
        doc = self.fleet()
        self.assertEqual((doc["id"], doc["source"], doc["instances"], doc["registered"],
                          doc["watching"], doc["fingerprints_shared"]),
                         (SELF, "kubernetes", 3, True, True, False))
        self.assertEqual(doc["members"], [{"id": "rondel-0", "fingerprints": "unknown"},
                                          {"id": "rondel-1", "fingerprints": {"p": own}},
                                          {"id": "rondel-2", "fingerprints": "unknown"}])
        self.assertEqual(doc["pools"], [{"pool": "p", "fingerprint": own, "majority": "unknown",
                                         "disagrees": None}])

    def test_n_follows_readiness_within_2s(self):
        generation = metric_sum(self.metrics(), "rondel_config_generation")
        self.api.set_slice("rondel-x1", endpoints(not_ready={"rondel-2"}), port=8080)
        t0 = time.monotonic()
        wait_until(lambda: self.instances() == 2, timeout=5, interval=0.01,
                   what="N = 2 after rondel-2 is not ready")
        took = time.monotonic() - t0
        print(f"\nfleet (kubernetes): N followed a not-ready endpoint in {took:.3f}s")
        self.assertLess(took, 2.0)
        self.assertEqual([m["id"] for m in self.fleet()["members"]], ["rondel-0", "rondel-1"])
        # Serving but terminating: leaving the fleet, not counted either.
        self.api.set_slice("rondel-x1", endpoints(terminating={"rondel-0"}), port=8080)
        wait_until(lambda: [m["id"] for m in self.fleet()["members"]] == ["rondel-1", "rondel-2"],
                   timeout=2, interval=0.01, what="rondel-0 terminating left the fleet")
        # This instance's own endpoint not ready: it is not registered.
        self.api.set_slice("rondel-x1", endpoints(not_ready={SELF}), port=8080)
        wait_until(lambda: metric_sum(self.metrics(), "rondel_fleet_registered") == 0,
                   timeout=2, interval=0.01, what="unregistered")
        self.assertEqual(self.instances(), 2)
        self.assertEqual(self.fleet()["registered"], False)
        # The fleet is no pool's source: its changes rebuild no snapshot.
        self.assertEqual(metric_sum(self.metrics(), "rondel_config_generation"), generation)

    def test_a_failing_api_server_keeps_the_last_n(self):
        start = self.rondel.out.count()
        self.api.failing = True
        self.api.cut()
        self.rondel.out.wait_for(r"warn discovery_failed pool=fleet reason=connect "
                                 r"error=\"kubernetes:shop/cache: http://127\.0\.0\.1:\d+: "
                                 r"watch: closed\"", timeout=5, start=start)
        # A change the failing server cannot deliver: N stays what was last read.
        self.api.set_slice("rondel-x1", endpoints(not_ready={"rondel-0", "rondel-2"}),
                           port=8080, notify=False)
        for _ in range(10):
            self.assertEqual(self.instances(), 3)
            time.sleep(0.1)
        self.assertEqual(self.fleet()["watching"], False)
        # Back, but with its history lost: 410 Gone, then a list that has the change.
        self.api.expire_next_watch = True
        self.api.failing = False
        wait_until(lambda: self.instances() == 1, timeout=5, interval=0.02,
                   what="N caught up after the server came back")
        self.assertEqual(self.fleet()["watching"], True)


class FleetCheckOnly(unittest.TestCase):
    """`rondel -c` checks `fleet: {kubernetes}` without contacting the API server."""

    def run_check(self, path, fleet):
        with open(path, "w") as f:
            f.write("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                    "pools:\n  - name: p\n    backends: [{ address: 127.0.0.1:9 }]\n" + fleet)
        return subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, text=True,
                              timeout=10)

    def test_check_contacts_no_api_server(self):
        listener, port = would_see_a_connection()
        workdir = tempfile.mkdtemp(prefix="rondel-it-fleet-k8s-check-")
        p = self.run_check(os.path.join(workdir, "good.yaml"),
                           f"fleet: {{ kubernetes: {{ service: rondel, port: http, "
                           f"server: http://127.0.0.1:{port} }} }}\n")
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "OK"), p.stderr)
        with self.assertRaises(socket.timeout):
            listener.accept()
        listener.close()
        bad = os.path.join(workdir, "bad.yaml")
        p = self.run_check(bad, "fleet: { kubernetes: { service: Rondel, port: http } }\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{bad}:6:33: 'service' must be a Service name", p.stderr)
        both = os.path.join(workdir, "both.yaml")
        p = self.run_check(both, "fleet:\n  etcd: { endpoints: [http://127.0.0.1:2379], "
                                 "prefix: /f/ }\n  kubernetes: { service: r, port: http }\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{both}:8:15: 'fleet' takes one source: 'etcd' or 'kubernetes', not both",
                      p.stderr)
        missing = os.path.join(workdir, "missing")
        p = self.run_check(os.path.join(workdir, "files.yaml"),
                           f"fleet: {{ kubernetes: {{ service: r, port: http, server: "
                           f"https://127.0.0.1:{port}, token_file: {missing}/token }} }}\n")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.splitlines(), [
            f"fleet: {missing}/token: cannot read the token file: No such file or directory"])


if __name__ == "__main__":
    main()
