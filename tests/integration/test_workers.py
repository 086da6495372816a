"""Several workers (performance issue, multi-worker half): `workers: 2` runs two event loops.

Each worker has its own SO_REUSEPORT listener, sessions and backend connections; in-flight
counts are shared atomics, so the bounded-load cap holds over both. Checks: both workers serve
(each access-log line names its worker), the cap holds globally, every count returns to 0,
SIGHUP reaches both workers, SIGTERM drains both and exits 0, and the access log holds only
whole lines although both workers append to it.
"""
import math
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

from harness import (Backend, HttpConn, Rondel, access_records, http_get, main, make_config,
                     wait_until)

DRAINED = 32  # slow requests in flight at the SIGTERM


def parallel_gets(port, paths, conns_per_thread=1, timeout=20):
    """GETs `paths` over len(paths) fresh connections at once; returns the statuses."""
    statuses = []
    lock = threading.Lock()

    def one(path):
        try:
            status = http_get(port, path, timeout=timeout)[0]
        except Exception as e:  # noqa: BLE001
            status = repr(e)
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout + 5)
    return statuses


class TwoWorkers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-workers-")
        self.access = os.path.join(self.dir, "access.log")
        self.backends = [Backend(f"b{i}") for i in range(3)]

    def tearDown(self):
        for b in self.backends:
            b.stop()

    def config(self, backends=None, extra_pool=None):
        pool = {"balance_factor": 125, "capacity_slack": 0}
        pool.update(extra_pool or {})
        return make_config(backends or self.backends, pool=pool,
                           log={"access_log": self.access},
                           extra="workers: 2\ndrain_timeout: 10s\n")

    def test_both_workers_serve_and_counts_return_to_zero(self):
        rondel = Rondel(self.config(), workdir=self.dir)
        self.assertTrue(rondel.lines(r"info started .*workers=2"))
        # Many short connections: the kernel spreads them over both listeners.
        for round_ in range(4):
            statuses = parallel_gets(rondel.port, [f"/obj/{round_}-{i}" for i in range(40)])
            self.assertEqual(statuses.count(200), 40, statuses)
        recs = access_records(self.access, timeout=5, min_count=160)
        self.assertEqual(len(recs), 160)
        workers = {r.get("worker") for r in recs}
        self.assertEqual(workers, {"0", "1"}, "requests per worker: %s" % {
            w: sum(1 for r in recs if r.get("worker") == w) for w in workers})
        # Keep-alive connections on both workers, then every count back to 0.
        conns = [HttpConn(rondel.port) for _ in range(16)]
        for i, c in enumerate(conns):
            for j in range(5):
                c.request("GET", f"/ka/{i}/{j}")
                self.assertEqual(c.read_response()[0], 200)
        for c in conns:
            c.close()
        rondel.wait_idle()
        self.assertEqual(rondel.stop(), 0)

    def test_in_flight_bound_is_global(self):
        # Every request has the same home backend, which holds each one 400 ms: the home fills
        # up to its cap and the rest spill. The cap counts the requests of both workers.
        rondel = Rondel(self.config(), workdir=self.dir)
        for b in self.backends:
            b.reset()
        n = 24
        # Distinct keys (no hot-key replication) that all have the same home backend.
        home = self.backends[0].address
        keys = [k for k in (f"/home/{i}?delay=400" for i in range(2000))
                if rondel.route("p", k)["owner"] == home][:n]
        self.assertEqual(len(keys), n)
        statuses = parallel_gets(rondel.port, keys)
        self.assertEqual(statuses.count(200), n, statuses)
        recs = access_records(self.access, timeout=5, min_count=n)
        self.assertEqual({r.get("worker") for r in recs}, {"0", "1"})
        # cap = ceil(1.25 * (total + 1) / 3) with total + 1 <= n.
        cap = math.ceil(1.25 * n / len(self.backends))
        peaks = [b.stats()["max_in_flight"] for b in self.backends]
        self.assertLessEqual(max(peaks), cap, f"peaks {peaks}, cap {cap}")
        self.assertEqual(sum(b.stats()["requests"] for b in self.backends), n)
        rondel.wait_idle()
        self.assertEqual(rondel.stop(), 0)

    def test_sighup_reaches_every_worker(self):
        rondel = Rondel(self.config(backends=self.backends[:1]), workdir=self.dir)
        statuses = parallel_gets(rondel.port, [f"/a/{i}" for i in range(30)])
        self.assertEqual(statuses.count(200), 30)
        self.assertEqual(self.backends[1].stats()["requests"], 0)
        # The new configuration names only b1: after the reload no worker may use b0.
        # Both workers served the first batch, so each holds pooled connections to b0.
        first = [r for r in access_records(self.access, timeout=10, min_count=30)
                 if r.get("target", "").startswith("/a/")]
        self.assertEqual({r.get("worker") for r in first}, {"0", "1"})
        rondel.reload(self.config(backends=self.backends[1:2]))
        # The workers pick the snapshot up on their own loops, and each closes its pooled
        # connections to the retired b0 as it does: all closed = both have the new snapshot.
        # (The /_stats request itself is one open connection.)
        wait_until(lambda: self.backends[0].stats()["connections_open"] <= 1, timeout=10,
                   what="both workers on the new snapshot (b0's pooled connections closed)")
        before = self.backends[0].stats()["requests"]
        statuses = parallel_gets(rondel.port, [f"/b/{i}" for i in range(40)])
        self.assertEqual(statuses.count(200), 40)
        self.assertEqual(self.backends[0].stats()["requests"], before)
        recs = [r for r in access_records(self.access, timeout=5, min_count=70)
                if r.get("target", "").startswith("/b/")]
        self.assertEqual(len(recs), 40)
        self.assertEqual({r.get("worker") for r in recs}, {"0", "1"})
        self.assertEqual({r.get("backend") for r in recs}, {self.backends[1].address})
        # The retired backend's pooled connections are closed by the worker that held them.
        # (The /_stats request itself is one open connection.)
        wait_until(lambda: self.backends[0].stats()["connections_open"] <= 1, timeout=5,
                   what="b0's pooled connections closed")
        rondel.wait_idle()
        self.assertEqual(rondel.stop(), 0)

    def test_sigterm_drains_both_workers(self):
        rondel = Rondel(self.config(), workdir=self.dir)
        results = []
        lock = threading.Lock()

        def one(i):
            try:
                r = http_get(rondel.port, f"/slow/{i}?delay=800", timeout=20)[0]
            except Exception as e:  # noqa: BLE001
                r = repr(e)
            with lock:
                results.append(r)

        # SO_REUSEPORT gives each new connection to a worker by a hash of its 4-tuple, a fair
        # coin: all DRAINED on one worker has P = 2 * 2^-32 = 4.7e-10 (16 gave 3.1e-5).
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(DRAINED)]
        for t in threads:
            t.start()
        wait_until(lambda: rondel.requests_in_flight() >= DRAINED, timeout=5,
                   what=f"{DRAINED} requests in flight")
        rondel.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=20)
        self.assertEqual(results, [200] * DRAINED)
        rondel.proc.wait(timeout=15)
        self.assertEqual(rondel.proc.returncode, 0)
        # New connections are refused once it is gone.
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", rondel.port), timeout=2).close()
        recs = access_records(self.access, timeout=5, min_count=DRAINED)
        self.assertEqual({r.get("worker") for r in recs}, {"0", "1"})

    def test_access_log_has_only_whole_lines(self):
        rondel = Rondel(self.config(), workdir=self.dir)
        stop = time.monotonic() + 2.0

        def client(k):
            i = 0
            while time.monotonic() < stop:
                with HttpConn(rondel.port) as c:
                    for _ in range(20):
                        c.request("GET", f"/line/{k}/{i}?pad={'x' * (i % 300)}")
                        c.read_response()
                        i += 1

        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        self.assertEqual(rondel.stop(), 0)
        with open(self.access) as f:
            lines = f.read().split("\n")
        self.assertEqual(lines[-1], "")
        bad = [l for l in lines[:-1] if not (l.startswith("access client=") and " worker=" in l)]
        self.assertEqual(bad, [])


if __name__ == "__main__":
    main()
