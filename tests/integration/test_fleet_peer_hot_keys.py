"""Hot keys a fleet without etcd agrees on: members read each other's counts from their admin APIs.

Three rondel instances r1..r3 in one Kubernetes fleet (`fleet: {kubernetes, share_hot_keys: true,
peer_port: P}`), the ready endpoints 127.0.0.2-.4 of one EndpointSlice served by
test_discovery_k8s's FakeApiServer, each instance's admin API on its own endpoint IP and the
same port P, as pods of one Deployment have it. 8 backends, `hot_keys: {share: 5}`; every
instance gets the same cold keys, only r1 gets the hot key /hot. Each instance serves its own
record on GET /api/fleet/record and reads every other ready member's there:
- r2 and r3, which never saw /hot, replicate it too (R > 1 in their /api/fleet);
- over the samples where the three report the same epoch built from 3 contributors, their tables
  are identical on all three (every key, every replica count), as an etcd fleet's are;
- r3 leaves the EndpointSlice: r1 no longer reads it (contributors 2) and requests go on.
The same on a fixed fleet (`fleet: {peers: [{id, admin}, ...], id}`, HAProxy's `peers`): the
members are the list, N is 3 from the start, and a member that stops is no longer counted.
`rondel -c` accepts share_hot_keys with kubernetes and rejects a peer_port outside 1..65535.
"""
import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (RONDEL_BIN, Backend, Rondel, http_get, http_request, main,
                     metric_sum, parse_metrics, wait_until)
from test_discovery_k8s import NS, SERVICE, FakeApiServer, endpoint
from test_fleet_hot_keys import closed_loop, sample_agreement, stop_fleet, table, table_of

PODS = {"r1": "127.0.0.2", "r2": "127.0.0.3", "r3": "127.0.0.4"}


def can_bind(ip, port=0):
    s = socket.socket()
    try:
        s.bind((ip, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def shared_admin_port():
    """One port free on 127.0.0.1 and on every member's IP: the fleet's peer_port."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if all(can_bind(ip, port) for ip in PODS.values()):
            return port
    raise AssertionError("no port free on 127.0.0.2-.4")


def admin_get(r, path):
    """(status, headers, body) of a GET on r's admin API, at its own IP."""
    conn = http.client.HTTPConnection(r.admin_ip, r.admin_port, timeout=10)
    try:
        return http_request(r.admin_port, "GET", path, conn=conn)
    finally:
        conn.close()


def backend_list(backends, weight):
    """The pool's backends, the first with `weight` (another weight: another placement)."""
    return ", ".join(f"{{ address: {b.address}, weight: {weight if i == 0 else 1} }}"
                     for i, b in enumerate(backends))


def fleet_doc(r):
    return json.loads(admin_get(r, "/api/fleet")[2])


def metrics(r):
    return parse_metrics(admin_get(r, "/metrics")[2].decode())[0]


@unittest.skipIf(not can_bind("127.0.0.2"), "127.0.0.2 cannot be bound")
class K8sFleetHotKeys(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-it-fleet-peer-hot-")
        self.start_registry()
        self.backends = [Backend(f"h{i}") for i in range(8)]
        self.peer_port = shared_admin_port()
        self.stop_flag = threading.Event()
        self.rondels = []
        for name, ip in PODS.items():
            r = Rondel(self.config(name, ip), workdir=tempfile.mkdtemp(dir=self.dir))
            r.admin_ip = ip
            self.rondels.append(r)

    def tearDown(self):
        stop_fleet(self)
        if self.api is not None:
            self.api.stop()

    def start_registry(self):
        """The API server whose EndpointSlice lists the three instances."""
        self.token_file = os.path.join(self.dir, "token")
        with open(self.token_file, "w") as f:
            f.write("t0k3n\n")
        self.api = FakeApiServer(0, "t0k3n")
        self.api.set_slice("r-x1", self.endpoints(PODS), port=8080)

    def test_a_member_with_another_placement_is_flagged(self):
        """Reading each other's records, the members know each other's placement fingerprints:
        r3 reloaded with another weight is flagged by the majority, r1 is not."""
        r1, r2, r3 = self.rondels

        def fingerprints_known():
            doc = fleet_doc(r1)
            return doc["fingerprints_shared"] and all(
                isinstance(m["fingerprints"], dict) and "p" in m["fingerprints"]
                for m in doc["members"]) and len(doc["members"]) == 3
        wait_until(fingerprints_known, timeout=10, interval=0.05, what="r1 knowing 3 fingerprints")
        self.assertEqual(metric_sum(metrics(r3), "rondel_fleet_disagrees", pool="p"), 0)
        r3.reload(self.config("r3", PODS["r3"], weight=2))
        wait_until(lambda: metric_sum(metrics(r3), "rondel_fleet_disagrees", pool="p") == 1,
                   timeout=5, interval=0.05, what="r3 flagged")
        self.assertEqual(metric_sum(metrics(r1), "rondel_fleet_disagrees", pool="p"), 0)
        doc = fleet_doc(r1)
        pool = next(p for p in doc["pools"] if p["pool"] == "p")
        self.assertEqual((pool["majority"], pool["disagrees"]), (pool["fingerprint"], False), doc)

    def r3_leaves(self):
        """r3 leaves the Service's endpoints (it keeps running)."""
        self.api.set_slice("r-x1", self.endpoints({p: PODS[p] for p in ("r1", "r2")}), port=8080)

    @staticmethod
    def endpoints(pods):
        return [endpoint(ip, pod) for pod, ip in pods.items()]

    def config(self, name, ip, weight=1):
        backends = backend_list(self.backends, weight)
        return ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    hot_keys: { share: 5, window: 1s, min_count: 16 }\n"
                f"    backends: [{backends}]\n"
                "fleet:\n"
                f"  kubernetes: {{ service: {SERVICE}, namespace: {NS}, port: http, "
                f"server: http://127.0.0.1:{self.api.port}, token_file: {self.token_file} }}\n"
                f"  id: {name}\n  retry: 200ms\n  share_hot_keys: true\n"
                f"  peer_port: {self.peer_port}\n"
                f"admin: {{ bind: {ip}:{self.peer_port} }}\nlog: {{ level: info }}\n")

    def load(self, r, hot):
        closed_loop(r.port, hot, self.stop_flag)

    def test_members_read_each_others_counts_and_agree(self):
        wait_until(lambda: all(metric_sum(metrics(r), "rondel_fleet_instances") == 3
                               for r in self.rondels), timeout=10, interval=0.05,
                   what="every instance seeing 3")
        self.threads = [threading.Thread(target=self.load, args=(r, i == 0), daemon=True)
                        for i, r in enumerate(self.rondels)]
        for t in self.threads:
            t.start()
        r1, r2, r3 = self.rondels
        hot_hash = json.loads(admin_get(r1, "/api/route?pool=p&key=/hot")[2])["hash"]

        def shared_on_r2_r3():
            for r in (r2, r3):
                _, t = table(fleet_doc(r))
                if not t or t.get(hot_hash, 1) < 2:
                    return False
            return True
        wait_until(shared_on_r2_r3, timeout=15, interval=0.1, what="/hot shared by r2 and r3")
        status, _, body = admin_get(r1, "/api/fleet/record")
        self.assertEqual(status, 200, body)
        record = json.loads(body)
        self.assertEqual(record["id"], "r1", record)
        self.assertIn("p", record["fingerprints"], record)
        self.assertIn("epoch", record["hot"]["p"], record)

        # Agreement over the same-epoch samples built from all three members' records.
        compared, agreed, partial, partial_agreed = sample_agreement(
            lambda: [fleet_doc(r) for r in self.rondels])
        source = fleet_doc(r1)["source"]
        print(f"\nfleet hot keys ({source}): {agreed} of {compared} same-epoch samples from 3 "
              f"contributors identical on 3 instances ({partial_agreed} of {partial} with a "
              f"peer's record late); /hot replicas {table(fleet_doc(r2))[1].get(hot_hash)}")
        self.assertGreater(compared, 10)
        self.assertEqual(agreed, compared)

        # r3 leaves: r1 reads only r2 from then on, and requests go on.
        self.r3_leaves()
        wait_until(lambda: table_of(fleet_doc(r1))[1] == 2, timeout=5, interval=0.05,
                   what="r1's table built from 2 contributors")
        for _ in range(15):
            self.assertLessEqual(table_of(fleet_doc(r1))[1], 2)
            time.sleep(0.1)
        self.assertEqual(http_get(r1.port, "/hot")[0], 200)
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=10)
            self.assertFalse(t.is_alive())


class PeersFleetHotKeys(K8sFleetHotKeys):
    """The same on a fixed fleet (`fleet: {peers: [{id, admin}, ...], id}`, HAProxy's `peers`):
    no API server, each member's admin address listed; r3 leaves by stopping, and r1, which
    then gets no answer from it, builds from 2 contributors."""

    def start_registry(self):
        self.api = None  # the list is the registry

    def config(self, name, ip, weight=1):
        backends = backend_list(self.backends, weight)
        peers = ", ".join(f"{{ id: {n}, admin: '{a}:{self.peer_port}' }}" for n, a in PODS.items())
        return ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    hot_keys: { share: 5, window: 1s, min_count: 16 }\n"
                f"    backends: [{backends}]\n"
                f"fleet: {{ peers: [{peers}], id: {name} }}\n"
                f"admin: {{ bind: {ip}:{self.peer_port} }}\nlog: {{ level: info }}\n")

    def load(self, r, hot):
        try:
            super().load(r, hot)
        except Exception:  # noqa: BLE001 - the instance that was stopped on purpose
            if getattr(self, "leaving", None) is not r:
                raise

    def r3_leaves(self):
        self.leaving = self.rondels[2]  # its load ends with the connection
        self.assertEqual(self.leaving.stop(), 0)

    def test_members_read_each_others_counts_and_agree(self):
        fleet = fleet_doc(self.rondels[0])
        self.assertEqual((fleet["source"], fleet["instances"], fleet["registered"]),
                         ("peers", 3, True), fleet)
        super().test_members_read_each_others_counts_and_agree()


class K8sHotKeysCheckOnly(unittest.TestCase):
    """`rondel -c` on share_hot_keys and peer_port with a Kubernetes fleet."""

    def run_check(self, path, peer_port, admin=True):
        with open(path, "w") as f:
            f.write("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                    "pools:\n  - name: p\n    backends: [{ address: 127.0.0.1:9 }]\n"
                    "fleet:\n  kubernetes: { service: r, port: http, server: http://127.0.0.1:9 }\n"
                    "  share_hot_keys: true\n"
                    + (f"  peer_port: {peer_port}\n" if peer_port else "")
                    + ("admin: { bind: 127.0.0.1:9901 }\n" if admin else ""))
        return subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, text=True,
                              timeout=10)

    def test_share_hot_keys_and_peer_port(self):
        workdir = tempfile.mkdtemp(prefix="rondel-it-fleet-k8s-hot-check-")
        for peer_port in (None, 9090):
            p = self.run_check(os.path.join(workdir, "good.yaml"), peer_port)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, "OK"), p.stderr)
        # Neither an admin listener nor a peer_port: nothing could answer the members' reads.
        p = self.run_check(os.path.join(workdir, "noadmin.yaml"), None, admin=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("'share_hot_keys' on Kubernetes reads the members' admin APIs", p.stderr)
        for peer_port in ("0", "70000"):
            bad = os.path.join(workdir, f"bad{peer_port}.yaml")
            p = self.run_check(bad, peer_port)
            self.assertEqual(p.returncode, 1, p.stderr)
            # Line 9 is `  peer_port: N`; the value starts at column 14.
            self.assertIn(f"{bad}:9:14: 'peer_port'", p.stderr)


if __name__ == "__main__":
    main()
