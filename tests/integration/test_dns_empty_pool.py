"""A DNS name that resolves to nothing empties its pool once its hold is over, and nothing else
(issue 13, defect 5); a glitch shorter than the hold empties nothing (issue 36).

dnsmasq serves gone.test (127.0.0.2, pool p) and caches.test (127.0.0.3, later .4, pool q), each
address with a test backend on one port. When gone.test stops resolving (NXDOMAIN) for longer
than the hold (1 s here), or its only
address is dropped after a connect failure, pool p is left with no backend: it answers 503 and
`warn pool_without_backends pool=p` is logged, while pool q keeps following its own DNS answers,
SIGHUP reloads keep succeeding, and p is served again once its name resolves. Before the fix,
every snapshot build failed (`dns_update_failed`, `reload_failed`) for as long as the name did
not resolve. With the default hold (30 s) a name that answers NXDOMAIN for a few TTLs keeps its
address and its pool serves throughout; before issue 36 the first NXDOMAIN emptied the pool.
"""
import os
import re
import tempfile
import time
import unittest

from harness import Backend, Rondel, http_get, main, metric_sum, scrape, wait_until
from test_dns_discovery import DNSMASQ, NAME, Dnsmasq, backends_on_one_port

GONE = "gone.test"
P_ADDR, Q_ADDR, Q_ADDR2 = "127.0.0.2", "127.0.0.3", "127.0.0.4"


class NamedDnsmasq(Dnsmasq):
    """dnsmasq serving (address, name) pairs (the base class serves one name)."""

    def write(self, pairs):
        tmp = self.hosts + ".tmp"
        with open(tmp, "w") as f:
            for addr, name in pairs:
                f.write(f"{addr} {name}\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.hosts)


INITIAL = [(P_ADDR, GONE), (Q_ADDR, NAME)]


@unittest.skipIf(DNSMASQ is None, "dnsmasq is not installed (Debian package dnsmasq-base)")
class EmptyPool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-dns-empty-")
        cls.dns = NamedDnsmasq(cls.dir, INITIAL)
        # One port on three addresses, from port 0 (retried on a new one when it is taken).
        cls.backends = backends_on_one_port(["g", "q3", "q4"], [P_ADDR, Q_ADDR, Q_ADDR2])
        cls.port = cls.backends[P_ADDR].port
        cls.text = (
            f"dns: {{ nameservers: [127.0.0.1:{cls.dns.port}], ttl: 1s, jitter: 0%, hold: 1s }}\n"
            "listeners:\n"
            "  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
            "  - { name: other, bind: 127.0.0.1:0, pool: q }\n"
            "pools:\n"
            "  - name: p\n"
            "    passive_health: { consecutive_failures: 0 }\n"
            f"    backends: [{{ address: {GONE}:{cls.port} }}]\n"
            "  - name: q\n"
            "    passive_health: { consecutive_failures: 0 }\n"
            f"    backends: [{{ address: {NAME}:{cls.port} }}]\n"
            "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")
        cls.rondel = Rondel(cls.text, workdir=cls.dir)

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        for b in cls.backends.values():
            b.stop()
        cls.dns.stop()
        assert code == 0, code

    def ids(self, pool):
        for p in self.rondel.pools()["pools"]:
            if p["name"] == pool:
                return [b["id"] for b in p["backends"]]
        raise AssertionError(f"no pool {pool}")

    def at(self, addr):
        return [f"{addr}:{self.port}"]

    def get(self, listener, path):
        status, headers, _ = http_get(self.rondel.ports[listener], path)
        return status, headers.get("x-backend")

    def setUp(self):
        self.dns.change(INITIAL)
        wait_until(lambda: self.ids("p") == self.at(P_ADDR) and self.ids("q") == self.at(Q_ADDR),
                   timeout=10, interval=0.05, what="both names resolved to their first address")
        self.assertEqual(self.get("web", "/x"), (200, "g"))

    def assert_p_empty_and_q_served(self, start):
        self.rondel.out.wait_for(r"warn pool_without_backends pool=p ", timeout=5, start=start)
        self.assertEqual(self.ids("p"), [])
        _, before, _ = scrape(self.rondel.admin_port)
        for i in range(5):
            self.assertEqual(self.get("web", f"/e/{i}")[0], 503)
        # The views serve the empty pool; its 503s are counted as "no backend".
        _, after, _ = scrape(self.rondel.admin_port)
        name = "rondel_pool_no_backend_total"
        self.assertEqual(metric_sum(after, name, pool="p") - metric_sum(before, name, pool="p"), 5)
        self.assertEqual(metric_sum(after, "rondel_pool_unusable_backends", pool="p"), 0)
        self.assertGreaterEqual(metric_sum(after, "rondel_pool_empty_builds_total", pool="p"), 1)
        self.assertEqual(metric_sum(after, "rondel_pool_empty_builds_total", pool="q"), 0)
        self.assertEqual(http_get(self.rondel.admin_port, "/api/ring?pool=p")[0], 200)
        self.assertEqual(self.rondel.route("p", "/e/0")["owner"], "")
        # A reload goes through with the empty pool, which stays empty.
        self.rondel.reload(self.text)
        self.assertEqual(self.ids("p"), [])
        self.assertEqual(self.get("web", "/after-reload")[0], 503)

    def test_nxdomain_empties_its_pool_and_other_pools_follow_their_dns(self):
        start = self.rondel.out.count()
        # gone.test answers NXDOMAIN; caches.test moves to another address in the same answer.
        self.dns.change([(Q_ADDR2, NAME)])
        wait_until(lambda: self.ids("q") == self.at(Q_ADDR2), timeout=5, interval=0.05,
                   what="pool q following its DNS change while p's name resolves to nothing")
        self.assertEqual(self.get("other", "/o"), (200, "q4"))
        self.assert_p_empty_and_q_served(start)
        self.assertFalse(self.rondel.lines(r"dns_update_failed|reload_failed"))
        # The name resolves again: the pool is served again.
        self.dns.change(INITIAL)
        wait_until(lambda: self.ids("p") == self.at(P_ADDR), timeout=5, interval=0.05,
                   what="pool p back once its name resolves")
        self.assertEqual(self.get("web", "/back"), (200, "g"))

    def test_only_address_dropped_after_a_connect_failure_empties_its_pool(self):
        start = self.rondel.out.count()
        self.backends[P_ADDR].stop()
        try:
            status, _ = self.get("web", "/down")
            self.assertIn(status, (502, 503))  # its only backend refused the connection
            # Event waits: their timeouts cost only on failure, so they leave scheduling room.
            self.rondel.out.wait_for(rf"warn dns_address_dropped pool=p name={GONE} ", timeout=10,
                                     start=start)
            wait_until(lambda: self.ids("p") == [], timeout=10, interval=0.02,
                       what="pool p left with no backend")
            self.assert_p_empty_and_q_served(start)
            self.assertEqual(self.get("other", "/o"), (200, "q3"))
            self.assertFalse(self.rondel.lines(r"dns_update_failed|reload_failed"))
        finally:
            self.backends[P_ADDR] = Backend("g", host=P_ADDR, port=self.port)
        # The name still lists the address: it comes back with the next regular answer.
        wait_until(lambda: self.ids("p") == self.at(P_ADDR), timeout=5, interval=0.05,
                   what="address back after re-resolution")
        self.assertEqual(self.get("web", "/back"), (200, "g"))


@unittest.skipIf(DNSMASQ is None, "dnsmasq is not installed (Debian package dnsmasq-base)")
class DnsGlitch(unittest.TestCase):
    """The default hold: a name that answers NXDOMAIN for a few TTLs empties no pool."""

    def test_nxdomain_shorter_than_the_hold_keeps_the_pool_serving(self):
        workdir = tempfile.mkdtemp(prefix="rondel-it-dns-glitch-")
        dns = NamedDnsmasq(workdir, INITIAL)  # NAME too: the base class waits for its answer
        backend = Backend("g", host=P_ADDR, port=0)
        addr = f"{P_ADDR}:{backend.port}"
        rondel = Rondel(
            f"dns: {{ nameservers: [127.0.0.1:{dns.port}], ttl: 1s, jitter: 0% }}\n"  # hold: 30s
            "listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
            "pools:\n  - name: p\n"
            f"    backends: [{{ address: {GONE}:{backend.port} }}]\n"
            "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n", workdir=workdir)
        try:
            def ids():
                return [b["id"] for b in rondel.pools()["pools"][0]["backends"]]

            self.assertEqual(ids(), [addr])
            start = rondel.out.count()
            dns.change([(Q_ADDR, NAME)])  # gone.test: NXDOMAIN
            # Three TTLs of NXDOMAIN: the pool keeps its backend and serves every request.
            deadline = time.monotonic() + 3.0
            n = 0
            while time.monotonic() < deadline:
                status, headers, _ = http_get(rondel.port, f"/glitch/{n}")
                self.assertEqual((status, headers.get("x-backend")), (200, "g"))
                self.assertEqual(ids(), [addr])
                n += 1
                time.sleep(0.1)
            # rondel did see the NXDOMAIN (re-resolving every TTL) and held the address.
            rondel.out.wait_for(rf"info dns_address_held pool=p name={GONE} "
                                rf"backend={re.escape(addr)} hold_ms=30000", timeout=1, start=start)
            self.assertFalse(rondel.lines(r"pool_without_backends|dns_update "))
            dns.change(INITIAL)  # the name answers again: nothing to change
            time.sleep(2.5)  # two more re-resolutions
            self.assertEqual(ids(), [addr])
            self.assertFalse(rondel.lines(r"pool_without_backends|dns_update "))
        finally:
            self.assertEqual(rondel.stop(), 0)
            backend.stop()
            dns.stop()


if __name__ == "__main__":
    main()
