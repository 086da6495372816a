"""Routing outcomes: one definition of a spill, counted once, shown alike everywhere; and hash keys
that do not depend on incidental form (issue 13, defect 8).

1. Mixed traffic (a hot key whose owner is a slow backend, cold keys, requests without a key under
   missing_key: random) through a pool with the default routing knobs: the /metrics spill total,
   the per-backend spill-in counters, the spill pairs, /api/pools and the access log (owner set
   and not the backend) all count the same requests.
2. Two rondel instances, one on an IPv4 listener and one on a dual-stack [::] listener (where an
   IPv4 client is ::ffff:a.b.c.d), agree on the backend of every key for each hash_key kind,
   the second one receiving absolute-form targets and the first origin-form ones.
"""
import os
import socket
import tempfile
import threading
import unittest

from harness import (Backend, Rondel, access_records, http_get, main, make_config, metric_sum,
                     parse_responses, scrape)

POOL = "p"
SLOW_MS = 300


def request_from(source_ip, port, target, headers, timeout=10.0):
    """(status, headers) of one request sent from `source_ip` (any 127/8 address is local)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.bind((source_ip, 0))
        s.connect(("127.0.0.1", port))
        lines = [f"GET {target} HTTP/1.1", "Host: t", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
    finally:
        s.close()
    resp = parse_responses(data)
    if not resp:
        raise AssertionError(f"no response from rondel for {target}: {data!r}")
    return resp[0][0], resp[0][1]


class SpillCountsAgree(unittest.TestCase):
    def setUp(self):
        self.slow = Backend("slow", "--delay-ms", str(SLOW_MS))
        self.fast = [Backend(f"fast{i}") for i in range(3)]
        self.backends = [self.slow] + self.fast
        self.dir = tempfile.mkdtemp(prefix="rondel-it-")
        self.access = os.path.join(self.dir, "access.log")
        self.rondel = Rondel(make_config(self.backends, log={"access_log": self.access},
                                         pool={"hash_key": "header:X-Key",
                                               "missing_key": "random",
                                               "capacity_slack": 0}),
                             workdir=self.dir)

    def tearDown(self):
        self.rondel.stop()
        for b in self.backends:
            b.stop()

    def test_metrics_spill_in_and_access_log_count_the_same_spills(self):
        hot = next((k for k in (f"hot-{i}" for i in range(500))
                    if self.rondel.route(POOL, k)["owner"] == self.slow.address), None)
        self.assertIsNotNone(hot, "no key owned by the slow backend in 500 tries")
        threads, statuses, lock = [], [], threading.Lock()
        per_thread = 12
        start = threading.Barrier(16)  # the first (hot) requests overlap at the slow owner

        def client(t):
            start.wait(timeout=20)
            for i in range(per_thread):
                if i % 3 == 0:
                    headers = {"X-Key": hot}
                elif i % 3 == 1:
                    headers = {"X-Key": f"cold-{t}-{i}"}
                else:
                    headers = {}  # no key: missing_key random, never a spill
                status, _, _ = http_get(self.rondel.port, f"/t{t}/{i}", headers=headers,
                                        timeout=20)
                with lock:
                    statuses.append(status)

        for t in range(16):
            threads.append(threading.Thread(target=client, args=(t,)))
            threads[-1].start()
        for th in threads:
            th.join(timeout=60)
        total = 16 * per_thread
        self.assertEqual(statuses, [200] * total)
        self.rondel.wait_idle()
        recs = access_records(self.access, timeout=10, min_count=total)
        self.assertEqual(len(recs), total)
        keyless = [r for r in recs if r["owner"] == "-"]
        spilled = [r for r in recs if r["owner"] != "-" and r["owner"] != r["backend"]]
        self.assertEqual(len(keyless), 16 * (per_thread // 3))
        self.assertGreater(len(spilled), 0, "the slow owner of the hot key never shed a request")

        _, samples, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_spillover_total", pool=POOL), len(spilled))
        self.assertEqual(metric_sum(samples, "rondel_backend_spill_in_total", pool=POOL),
                         len(spilled))
        for b in self.backends:
            self.assertEqual(metric_sum(samples, "rondel_backend_spill_in_total", pool=POOL,
                                        backend=b.address),
                             sum(1 for r in spilled if r["backend"] == b.address), b.name)
        self.assertEqual(metric_sum(samples, "rondel_spillover_pairs_total", pool=POOL),
                         len(spilled))
        pool = self.rondel.pools()["pools"][0]
        self.assertEqual(pool["spilled"], len(spilled))
        self.assertEqual(sum(b["spill_in"] for b in pool["backends"]), len(spilled))


class KeysAgreeAcrossListenerKinds(unittest.TestCase):
    KINDS = ["uri", "path", "header:X-Key", "cookie:sid", "query:id", "src"]
    KEYS = 24

    def setUp(self):
        self.backends = [Backend(f"b{i}") for i in range(4)]
        self.rondels = []

    def tearDown(self):
        for r in self.rondels:
            r.stop()
        for b in self.backends:
            b.stop()

    def _routes(self, rondel, absolute):
        out = {}
        for i in range(self.KEYS):
            path = f"/obj/{i}?id={i}"
            target = f"http://cache.example{path}" if absolute else path
            status, headers = request_from(f"127.0.0.{i + 2}", rondel.port, target,
                                           {"X-Key": f"k{i}", "Cookie": f"a=1; sid=s{i}"})
            self.assertEqual(status, 200, target)
            out[i] = headers["x-backend"]
        return out

    def test_ipv4_and_dual_stack_listeners_route_every_key_alike(self):
        for kind in self.KINDS:
            with self.subTest(hash_key=kind):
                pool = {"hash_key": kind, "missing_key": "reject"}
                v4 = Rondel(make_config(self.backends, pool=pool))
                dual = Rondel(make_config(self.backends, pool=pool).replace(
                    "    bind: 127.0.0.1:0", '    bind: "[::]:0"', 1))
                self.rondels += [v4, dual]
                on_v4 = self._routes(v4, absolute=False)
                on_dual = self._routes(dual, absolute=True)
                self.assertEqual(on_v4, on_dual)
                self.assertGreater(len(set(on_v4.values())), 1, "every key on one backend")
                v4.stop()
                dual.stop()


if __name__ == "__main__":
    main()
