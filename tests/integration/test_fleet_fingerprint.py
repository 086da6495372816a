"""Placement fingerprint across a fleet (fleet issue, part 2).

Three rondel instances are fed the same backends (ids, weights) in different config orders; they
show one fingerprint in /api/pools and in rondel_pool_placement_fingerprint, and /api/route sends
10,000 keys to the same owner and the same chosen backend on each. A fourth instance with one
backend put in maintenance shows another fingerprint (and the same one again once it is ready).
With dnsmasq installed, two instances whose DNS servers list the same addresses in different
orders also agree.
"""
import json
import os
import tempfile
import unittest
from urllib.parse import quote

from harness import (Backend, Rondel, http_get, http_request, main, make_config, scrape,
                     wait_until)

KEYS = 10_000
TOKEN = "fleet-token"


def fingerprint(rondel, pool="p"):
    return next(p["fingerprint"] for p in rondel.pools()["pools"] if p["name"] == pool)


def metric_fingerprints(rondel):
    _, samples, _ = scrape(rondel.admin_port)
    return {l["fingerprint"] for n, l, v in samples
            if n == "rondel_pool_placement_fingerprint" and l["pool"] == "p" and v == 1}


def routes(rondel, keys):
    """(owner, chosen) of each key per /api/route."""
    out = []
    for k in keys:
        status, _, body = http_get(rondel.admin_port, f"/api/route?pool=p&key={quote(k, safe='')}")
        assert status == 200, status
        r = json.loads(body)
        out.append((r["owner"], r["chosen"]))
    return out


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend(f"f{i}") for i in range(5)]
        entries = [{"address": b.address, "weight": w}
                   for b, w in zip(cls.backends, (1, 2, 1, 3, 2))]
        entries[1]["id"] = "cache-b"  # a named id among address ids
        orders = [entries, entries[::-1], [entries[i] for i in (2, 4, 0, 3, 1)]]
        cls.dir = tempfile.mkdtemp(prefix="rondel-fleet-")
        token_file = os.path.join(cls.dir, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN)
        admin = {"token_file": token_file}
        cls.instances = [Rondel(make_config(o, pool={"algorithm": "ring"}, admin=admin))
                         for o in orders]
        cls.fourth = Rondel(make_config(orders[0], pool={"algorithm": "ring"}, admin=admin))

    @classmethod
    def tearDownClass(cls):
        codes = [r.stop() for r in cls.instances + [cls.fourth]]
        for b in cls.backends:
            b.stop()
        assert codes == [0] * 4, codes

    def test_same_backends_in_any_order_give_one_fingerprint_and_one_routing(self):
        fps = [fingerprint(r) for r in self.instances]
        self.assertEqual(len(set(fps)), 1, fps)
        self.assertRegex(fps[0], r"^[0-9a-f]{16}$")
        for r in self.instances:
            self.assertEqual(metric_fingerprints(r), {fps[0]})
        keys = [f"/obj/{i}" for i in range(KEYS)]
        reference = routes(self.instances[0], keys)
        self.assertEqual(len({owner for owner, _ in reference}), 5)  # every backend owns keys
        for r in self.instances[1:]:
            other = routes(r, keys)
            differ = [k for k, a, b in zip(keys, reference, other) if a != b]
            self.assertEqual(differ, [])

    def test_a_backend_down_on_one_instance_changes_its_fingerprint(self):
        fp = fingerprint(self.instances[0])
        self.assertEqual(fingerprint(self.fourth), fp)
        victim = self.backends[3].address
        path = f"/api/pools/p/backends/{victim}"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        status, _, _ = http_request(self.fourth.admin_port, "PUT", path, headers=auth,
                                    body='{"state": "maint"}')
        self.assertEqual(status, 200)
        down = fingerprint(self.fourth)
        self.assertNotEqual(down, fp)
        self.assertEqual(metric_fingerprints(self.fourth), {down})
        status, _, _ = http_request(self.fourth.admin_port, "PUT", path, headers=auth,
                                    body='{"state": "ready"}')
        self.assertEqual(status, 200)
        self.assertEqual(fingerprint(self.fourth), fp)


try:
    from test_dns_discovery import DNSMASQ, Dnsmasq, backends_on_one_port
except ImportError:  # pragma: no cover
    DNSMASQ = None

DNS_ADDRS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]


@unittest.skipIf(DNSMASQ is None, "dnsmasq is not installed (Debian package dnsmasq-base)")
class FleetDns(unittest.TestCase):
    def test_dns_answers_in_different_orders_give_one_fingerprint(self):
        dirs = [tempfile.mkdtemp(prefix="rondel-fleet-dns-") for _ in range(2)]
        servers = [Dnsmasq(dirs[0], DNS_ADDRS), Dnsmasq(dirs[1], DNS_ADDRS[::-1])]
        backends = backends_on_one_port([f"n{a.rsplit('.', 1)[1]}" for a in DNS_ADDRS],
                                        DNS_ADDRS)
        port = backends[DNS_ADDRS[0]].port
        instances = []
        try:
            for dns, d in zip(servers, dirs):
                text = (f"dns: {{ nameservers: [127.0.0.1:{dns.port}], ttl: 30s }}\n"
                        "listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                        "pools:\n  - name: p\n"
                        f"    backends: [{{ address: caches.test:{port} }}]\n"
                        "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")
                instances.append(Rondel(text, workdir=d))
            want = sorted(f"{a}:{port}" for a in DNS_ADDRS)
            for r in instances:
                wait_until(lambda: sorted(b["id"] for b in r.pools()["pools"][0]["backends"])
                           == want, timeout=10, what="every address resolved")
            self.assertEqual(fingerprint(instances[0]), fingerprint(instances[1]))
            keys = [f"/dns/{i}" for i in range(2000)]
            self.assertEqual(routes(instances[0], keys), routes(instances[1], keys))
        finally:
            codes = [r.stop() for r in instances]
            for b in backends.values():
                b.stop()
            for s in servers:
                s.stop()
        self.assertEqual(codes, [0, 0])


if __name__ == "__main__":
    main()
