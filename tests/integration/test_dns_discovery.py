"""DNS discovery with a real DNS server (configuration and lifecycle issue).

dnsmasq, run by hand on a high port, serves caches.test with three loopback addresses
(127.0.0.2, .3, .4), each with a test backend on the same port. rondel (c-ares, TTL 1 s, jitter
10%, hold 2 s) makes each address a backend with id ADDRESS:PORT, follows an added address within
TTL plus jitter, keeps an address the answers stop listing for the hold and then removes it,
moving only the changed backends' keys, and drops an address whose connection fails at once
(whatever the hold).
"""
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import Backend, Rondel, _processes, http_get, main, wait_until

DNSMASQ = shutil.which("dnsmasq") or ("/usr/sbin/dnsmasq" if os.path.exists("/usr/sbin/dnsmasq")
                                      else None)
NAME = "caches.test"
ADDRS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
TTL_S = 1.0
HOLD_S = 2.0
SAMPLE_KEYS = 600


def backends_on_one_port(names, hosts):
    """{host: Backend} with one backend per host, all on the same port: the first listens on
    port 0 and reports its port, the others listen on that port on their own addresses. When
    one of them cannot (something else holds the port there), all are stopped and the round is
    tried again with a new port (bounded tries)."""
    for _ in range(20):
        first = Backend(names[0], host=hosts[0], port=0)
        started = {hosts[0]: first}
        try:
            for name, h in zip(names[1:], hosts[1:]):
                started[h] = Backend(name, host=h, port=first.port)
            return started
        except AssertionError:  # the backend exited: its address and port were taken
            for b in started.values():
                b.stop()
    raise AssertionError("no port free on every one of " + ", ".join(hosts))


class Dnsmasq:
    """dnsmasq serving `addrs` for NAME from a hosts file (or the hosts-file `lines` given), with
    `extra` flags (e.g. --srv-host=...; test_deploy_srv.py)."""

    def __init__(self, workdir, addrs, extra=(), lines=None):
        self.dir = workdir
        os.chmod(self.dir, 0o755)  # dnsmasq re-reads the hosts file as user nobody
        self.hosts = os.path.join(self.dir, "hosts")
        if lines is None:
            self.write(addrs)
        else:
            self.write_lines(lines)
        # dnsmasq cannot listen on port 0 and report its port (--port=0 turns DNS off), so it
        # gets a port the kernel just handed out on UDP and free on TCP too (dnsmasq listens on
        # both). Another process may still take it before dnsmasq binds: dnsmasq then exits at
        # once, and is started again on a new port (bounded tries) instead of failing the test.
        for _ in range(20):
            self.port = self._candidate_port()
            self.proc = subprocess.Popen(
                [DNSMASQ, "--no-daemon", f"--port={self.port}", "--listen-address=127.0.0.1",
                 "--bind-interfaces", "--no-resolv", "--no-hosts", f"--addn-hosts={self.hosts}",
                 "--conf-file=/dev/null", "--pid-file=", "--local=/test/", "--log-facility=-",
                 *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _processes.append(self.proc)
            if wait_until(self._answers_or_exited, timeout=5, what="dnsmasq answering") is True:
                return
            self.proc.wait(timeout=5)
        raise AssertionError("dnsmasq could not bind any port it was given")

    @staticmethod
    def _candidate_port():
        for _ in range(50):
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.bind(("127.0.0.1", 0))
            port = u.getsockname()[1]
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                t.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue  # the local port of some TCP connection (load tests use many)
            finally:
                t.close()
                u.close()
        raise AssertionError("no port free on both UDP and TCP")

    def _answers_or_exited(self):
        """True when dnsmasq answers a query, "exited" when it exited (its port was taken)."""
        if self.proc.poll() is not None:
            return "exited"
        return self._answers()

    def write(self, addrs):
        self.write_lines(f"{a} {NAME}" for a in addrs)

    def write_lines(self, lines):
        tmp = self.hosts + ".tmp"
        with open(tmp, "w") as f:
            for line in lines:
                f.write(line + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.hosts)

    def change(self, addrs):
        self.write(addrs)
        self.proc.send_signal(signal.SIGHUP)  # re-reads --addn-hosts

    def change_lines(self, lines):
        self.write_lines(lines)
        self.proc.send_signal(signal.SIGHUP)

    def _answers(self):
        return self.answer_count() is not None

    def answer_count(self):
        """How many A records dnsmasq answers for NAME now (None: no answer)."""
        q = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" +
             b"".join(bytes([len(p)]) + p.encode() for p in NAME.split(".")) +
             b"\x00\x00\x01\x00\x01")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(0.3)
        try:
            s.sendto(q, ("127.0.0.1", self.port))
            r = s.recv(512)
            return int.from_bytes(r[6:8], "big") if len(r) > len(q) else None
        except OSError:
            return None
        finally:
            s.close()

    def serve(self, addrs):
        """change(addrs), returning once dnsmasq answers with them: the moment from which a
        resolver that asks again gets the new answer."""
        self.change(addrs)
        wait_until(lambda: self.answer_count() == len(addrs), timeout=5,
                   what=f"dnsmasq answering with {len(addrs)} addresses")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)


@unittest.skipIf(DNSMASQ is None, "dnsmasq is not installed (Debian package dnsmasq-base)")
class DnsDiscovery(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-dns-")
        cls.dns = Dnsmasq(cls.dir, ADDRS)
        cls.backends = backends_on_one_port([f"d{a.rsplit('.', 1)[1]}" for a in ADDRS], ADDRS)
        cls.port = cls.backends[ADDRS[0]].port
        text = (f"dns: {{ nameservers: [127.0.0.1:{cls.dns.port}], ttl: 1s, jitter: 10%, "
                f"hold: {HOLD_S:g}s }}\n"
                "listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    passive_health: { consecutive_failures: 0 }\n"
                f"    backends: [{{ address: {NAME}:{cls.port}, labels: [found] }}]\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")
        cls.rondel = Rondel(text, workdir=cls.dir)

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        for b in cls.backends.values():
            b.stop()
        cls.dns.stop()
        assert code == 0, code

    def ids(self):
        return sorted(b["id"] for b in self.rondel.pools()["pools"][0]["backends"])

    def expect(self, addrs):
        return sorted(f"{a}:{self.port}" for a in addrs)

    def owners(self, keys):
        return {k: self.rondel.route("p", k)["owner"] for k in keys}

    def setUp(self):
        # Every test starts (and ends) with the three addresses served and resolved.
        self.dns.change(ADDRS)
        wait_until(lambda: self.ids() == self.expect(ADDRS), timeout=10, interval=0.05,
                   what="all three addresses resolved")

    def test_each_address_is_a_backend(self):
        self.assertEqual(self.ids(), self.expect(ADDRS))
        # The entry's labels (subsets) apply to every address its name resolves to.
        self.assertEqual([b["labels"] for b in self.rondel.pools()["pools"][0]["backends"]],
                         [["found"]] * len(ADDRS))
        seen = set()
        for i in range(60):
            status, headers, _ = http_get(self.rondel.port, f"/obj/{i}")
            self.assertEqual(status, 200)
            seen.add(headers["x-backend"])
        self.assertEqual(seen, {b.name for b in self.backends.values()})
        self.rondel.wait_idle()

    def test_changed_answers_are_followed_after_the_hold_and_only_their_keys_move(self):
        keys = [f"/k/{i}" for i in range(SAMPLE_KEYS)]
        before = self.owners(keys)
        gone = f"{ADDRS[2]}:{self.port}"
        # On a ring the keys that move when a backend goes are exactly that backend's arcs, so
        # the truth for the logged share is its key_share before the change (exact arc lengths).
        # The ids are addresses with port-0 ports, so the share is a new random draw every run.
        truth = next(b["key_share"] for b in self.rondel.pools()["pools"][0]["backends"]
                     if b["id"] == gone)
        start = self.rondel.out.count()
        self.dns.serve(ADDRS[:2])
        t0 = time.monotonic()  # from when the new answer is served (not when dnsmasq got HUP)
        # The first answer without it (within a TTL plus jitter) holds it: still a backend.
        self.rondel.out.wait_for(rf"info dns_address_held pool=p name={NAME} "
                                 rf"backend={re.escape(gone)} hold_ms=2000", timeout=5,
                                 start=start)
        self.assertIn(gone, self.ids())
        self.assertLess(time.monotonic() - t0, HOLD_S)  # else the check above proves nothing
        wait_until(lambda: self.ids() == self.expect(ADDRS[:2]), timeout=10, interval=0.05,
                   what="rondel following the removal")
        took = time.monotonic() - t0
        # Removed `hold` after the last answer that listed it, which came at most a TTL plus
        # jitter (1.1 s) before t0; the upper bound leaves 3 TTLs for the re-resolution at the end
        # of the hold, c-ares, the snapshot hand-over and this thread's polling.
        self.assertGreater(took, HOLD_S - 1.1 * TTL_S)
        self.assertLess(took, HOLD_S + 3 * TTL_S)
        after = self.owners(keys)
        moved = [k for k in keys if before[k] != after[k]]
        for k in moved:
            self.assertEqual(before[k], gone)  # only the removed backend's keys move
        self.assertEqual(len(moved), sum(1 for k in keys if before[k] == gone))
        m = self.rondel.out.wait_for(r"info dns_moved pool=p share=([0-9.]+)", timeout=5,
                                     start=start)
        logged = float(m.group(1))
        measured = len(moved) / len(keys)
        print(f"\ndns: removal followed in {took:.2f}s (hold {HOLD_S:g}s); "
              f"moved share logged {logged:.4f}, "
              f"ring {truth:.4f}, measured over {len(keys)} keys {measured:.4f}")
        # rondel estimates the share from 65536 sampled hashes: sd = sqrt(p(1-p)/65536) <= 0.00196,
        # so 0.01 is >= 5.1 sd and a false failure has P < 3.1e-7.
        self.assertAlmostEqual(logged, truth, delta=0.01)
        # The keys sampled here are a binomial draw from the same arcs: a 5-sd bound, P = 5.7e-7.
        self.assertAlmostEqual(measured, truth, delta=5 * math.sqrt(truth * (1 - truth) / len(keys)))

        self.dns.serve(ADDRS)
        t0 = time.monotonic()
        wait_until(lambda: self.ids() == self.expect(ADDRS), timeout=5, interval=0.05,
                   what="rondel following the addition")
        self.assertLess(time.monotonic() - t0, 3 * TTL_S)
        self.assertEqual(self.owners(keys), before)  # the keys come back
        for i in range(10):
            self.assertEqual(http_get(self.rondel.port, f"/again/{i}")[0], 200)

    def test_connect_failure_drops_the_address_at_once(self):
        victim_addr = ADDRS[1]
        victim = self.backends[victim_addr]
        victim_id = f"{victim_addr}:{self.port}"
        keys = [k for k in (f"/c/{i}" for i in range(400))
                if self.rondel.route("p", k)["owner"] == victim_id][:5]
        self.assertTrue(keys)
        victim.stop()
        try:
            start = self.rondel.out.count()
            status, headers, _ = http_get(self.rondel.port, keys[0])
            self.assertEqual(status, 200)  # retried on the next backend
            self.assertNotEqual(headers["x-backend"], victim.name)
            # dnsmasq still answers with the victim's address, so no re-resolution drops it:
            # the log line and the pool without it show the drop on the failed connect itself
            # (no bound on how soon the admin API shows it: that is scheduling, not DNS).
            self.rondel.out.wait_for(rf"warn dns_address_dropped pool=p name={NAME} "
                                     rf"backend={re.escape(victim_id)} reason=connect_failed",
                                     timeout=5, start=start)
            wait_until(lambda: victim_id not in self.ids(), timeout=5, interval=0.02,
                       what="address dropped from the pool")
            for k in keys:
                status, headers, _ = http_get(self.rondel.port, k)
                self.assertEqual(status, 200)
                self.assertNotEqual(headers["x-backend"], victim.name)
        finally:
            # Back on its address; the name still lists it, so it returns with a later answer.
            self.backends[victim_addr] = Backend(victim.name, host=victim_addr, port=self.port)
        wait_until(lambda: victim_id in self.ids(), timeout=5, interval=0.05,
                   what="address back after re-resolution")


@unittest.skipIf(DNSMASQ is None, "dnsmasq is not installed (Debian package dnsmasq-base)")
class DnsLifecycle(unittest.TestCase):
    """Names at start-up and on reload, each with its own rondel."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-dns-")
        cls.dns = Dnsmasq(cls.dir, ADDRS[:1])
        cls.backend = Backend("n2", host=ADDRS[0], port=0)
        cls.port = cls.backend.port
        cls.literal = Backend("lit")

    @classmethod
    def tearDownClass(cls):
        cls.backend.stop()
        cls.literal.stop()
        cls.dns.stop()

    def config(self, backends):
        return (f"dns: {{ nameservers: [127.0.0.1:{self.dns.port}], ttl: 1s }}\n"
                "listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                f"    backends: [{', '.join('{ address: %s }' % b for b in backends)}]\n"
                "admin: { bind: 127.0.0.1:0 }\n")

    def test_start_fails_with_exit_2_when_a_pool_resolves_to_nothing(self):
        r = Rondel(self.config([f"nothing.test:{self.port}"]), expect_start=False)
        self.assertEqual(r.proc.wait(timeout=10), 2)
        self.assertTrue(r.lines(r"config_invalid .*pool p: no backend"))

    def test_reload_to_a_new_name_waits_for_its_answer(self):
        r = Rondel(self.config([self.literal.address]))
        try:
            r.reload(self.config([self.literal.address, f"{NAME}:{self.port}"]))
            ids = sorted(b["id"] for b in r.pools()["pools"][0]["backends"])
            self.assertEqual(ids, sorted([self.literal.address, f"{ADDRS[0]}:{self.port}"]))
            self.assertTrue(r.lines(r"reload_waiting_dns"))
            names = set()
            for i in range(40):
                status, headers, _ = http_get(r.port, f"/r/{i}")
                self.assertEqual(status, 200)
                names.add(headers["x-backend"])
            self.assertEqual(names, {"lit", "n2"})
            # A name that does not resolve leaves the pool with its literal backend only.
            r.reload(self.config([self.literal.address, f"nothing.test:{self.port}"]))
            ids = [b["id"] for b in r.pools()["pools"][0]["backends"]]
            self.assertEqual(ids, [self.literal.address])
        finally:
            self.assertEqual(r.stop(), 0)


if __name__ == "__main__":
    main()
