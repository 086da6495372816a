"""Proxy data path, backend failures: retries (never a POST twice), connect refused / timed out,
response-header timeout, a backend killed mid-response, bad backend responses (502, connection
never pooled). After every case the in-flight counts return to 0 and rondel keeps serving."""
import os
import signal
import tempfile
import threading
import time
import unittest

from harness import (Backend, BlackholeListener, HttpConn, Rondel, access_records, access_seconds,
                     http_get, main, make_config, read_ledger, timer_on_time, unused_port,
                     wait_until)


class ProxyFailures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-fail-")
        self.to_stop = []

    def tearDown(self):
        for x in reversed(self.to_stop):
            if isinstance(x, Rondel):
                x.wait_idle()
                self.assertEqual(x.stop(), 0)
            else:
                x.stop()

    def backend(self, name, *flags):
        b = Backend(name, *flags)
        self.to_stop.append(b)
        return b

    def rondel(self, backends, **kw):
        kw.setdefault("log", {"access_log": os.path.join(self.dir, "access.log")})
        r = Rondel(make_config(backends, **kw))
        self.to_stop.append(r)
        return r

    def seconds(self, target):
        """rondel's own duration of the one request to `target` (its access line)."""
        return access_seconds(os.path.join(self.dir, "access.log"), target)

    def access(self, n):
        return access_records(os.path.join(self.dir, "access.log"), min_count=n)

    def test_post_never_sent_twice_when_backend_resets(self):
        ledgers = [os.path.join(self.dir, f"l{i}") for i in range(3)]
        bs = [self.backend(f"r{i}", "--fail-mode", "reset-after-request", "--ledger", ledgers[i])
              for i in range(3)]
        r = self.rondel(bs, pool={"retries": 2})
        for i, body in enumerate([b"x" * 10, b"", b"y" * 200000]):
            rid = f"post-{i}"
            with HttpConn(r.port) as c:
                c.request("POST", f"/pay/{i}", headers={"X-Request-Id": rid,
                                                        "Content-Length": str(len(body))},
                          body=body)
                status, _, _ = c.read_response()
                self.assertEqual(status, 502)
                self.assertTrue(c.closed_by_peer())
            # A backend ledgers a request before it resets, and rondel answered only after its
            # last attempt: the ledgers are complete once the exchange is over.
            r.wait_idle()
            seen = [e for p in ledgers for e in read_ledger(p) if e[0] == rid]
            self.assertLessEqual(len(seen), 1, f"POST {rid} reached backends {len(seen)} times")
        # A bodiless GET is idempotent and got no response byte: it is retried, on a different
        # backend each time, retries + 1 attempts in all.
        with HttpConn(r.port) as c:
            c.request("GET", "/idem", headers={"X-Request-Id": "get-1"})
            self.assertEqual(c.read_response()[0], 502)
        r.wait_idle()
        per_backend = [sum(1 for e in read_ledger(p) if e[0] == "get-1") for p in ledgers]
        self.assertEqual(per_backend, [1, 1, 1])
        rec = [x for x in self.access(4) if x["target"] == "/idem"][0]
        self.assertEqual(rec["attempts"], "3")
        self.assertEqual(rec["hops"], "2")

    def test_get_retried_on_next_backend_when_connection_refused(self):
        live = [self.backend(f"ok{i}") for i in range(2)]
        dead = f"127.0.0.1:{unused_port()}"
        r = self.rondel([{"address": dead}] + live, pool={"retries": 2})
        keys = [k for k in (f"/refused/{i}" for i in range(200))
                if r.route("p", k)["owner"] == dead][:10]
        self.assertGreater(len(keys), 3)
        by_addr = {b.address: b.name for b in live}
        for k in keys:
            pref = [p["id"] for p in r.route("p", k)["preference"]]
            status, h, _ = http_get(r.port, k)
            self.assertEqual(status, 200)
            self.assertEqual(h["x-backend"], by_addr[pref[1]], "not the next in the key's order")
        pools = r.pools()["pools"][0]
        dstate = [b for b in pools["backends"] if b["address"] == dead][0]
        self.assertGreaterEqual(dstate["connect_errors"], 1)
        recs = [x for x in self.access(len(keys)) if x["target"] in keys]
        # Until the passive check ejects it (5 failures), each request pays one refused connect.
        self.assertTrue(all(x["status"] == "200" for x in recs))
        self.assertTrue(all(x["owner"] == dead and x["backend"] != dead for x in recs))
        self.assertTrue(any(x["attempts"] == "2" and x["hops"] == "1" for x in recs))

    def test_connect_timeout(self):
        hole = BlackholeListener()
        try:
            r = self.rondel([{"address": hole.address}],
                            pool={"retries": 0, "connect_timeout": "500ms"})
            for i in range(2):
                t0 = time.monotonic()
                status, _, _ = http_get(r.port, f"/hole/{i}")
                elapsed = time.monotonic() - t0
                self.assertEqual(status, 504)
                self.assertIsNone(timer_on_time(elapsed, self.seconds(f"/hole/{i}"), 0.5))
            r.wait_idle()
            # With a live backend behind it, the request goes on after the connect timeout.
            ok = self.backend("after-hole")
            r2 = self.rondel([{"address": hole.address}, ok],
                             pool={"retries": 1, "connect_timeout": "500ms"})
            key = [k for k in (f"/h/{i}" for i in range(100))
                   if r2.route("p", k)["owner"] == hole.address][0]
            t0 = time.monotonic()
            status, h, _ = http_get(r2.port, key)
            elapsed = time.monotonic() - t0
            self.assertEqual((status, h["x-backend"]), (200, "after-hole"))
            self.assertIsNone(timer_on_time(elapsed, self.seconds(key), 0.5))
            r2.wait_idle()
        finally:
            hole.close()

    def test_response_header_timeout_with_stopped_backend(self):
        b = self.backend("stopped")
        r = self.rondel([b], pool={"retries": 0, "response_header_timeout": "1s"})
        self.assertEqual(http_get(r.port, "/warm")[0], 200)  # a pooled connection exists
        b.signal(signal.SIGSTOP)
        try:
            for target in ("/stopped/1", "/stopped/2"):
                t0 = time.monotonic()
                status, _, _ = http_get(r.port, target)
                elapsed = time.monotonic() - t0
                self.assertEqual(status, 504)
                self.assertIsNone(timer_on_time(elapsed, self.seconds(target), 1.0))
            r.wait_idle()
        finally:
            b.signal(signal.SIGCONT)
        self.assertEqual(http_get(r.port, "/resumed")[0], 200)

    def test_hung_backend_post_gets_504_once(self):
        ledgers = [os.path.join(self.dir, f"h{i}") for i in range(2)]
        bs = [self.backend(f"hang{i}", "--fail-mode", "hang", "--ledger", ledgers[i])
              for i in range(2)]
        r = self.rondel(bs, pool={"retries": 2, "response_header_timeout": "700ms"})
        t0 = time.monotonic()
        with HttpConn(r.port) as c:
            c.request("POST", "/hang-post", headers={"X-Request-Id": "hp"}, body=b"data")
            self.assertEqual(c.read_response()[0], 504)
        self.assertIsNone(timer_on_time(time.monotonic() - t0, self.seconds("/hang-post"), 0.7))
        r.wait_idle()  # the one attempt is over: a second would have been ledgered before it
        self.assertEqual(sum(1 for p in ledgers for e in read_ledger(p) if e[0] == "hp"), 1)

    def test_backend_killed_mid_response(self):
        victim = self.backend("victim")
        other = self.backend("other")
        r = self.rondel([victim, other])
        key = [k for k in (f"/big/{i}?size=500000000" for i in range(100))
               if r.route("p", k)["owner"] == victim.address][0]
        with HttpConn(r.port, timeout=10) as c:
            c.request("GET", key)
            status, h, _ = c.read_head()
            self.assertEqual(status, 200)
            self.assertEqual(h["content-length"], "500000000")
            got = 0
            while got < 2_000_000:  # read a little, slowly: the backend is blocked mid-body
                got += len(c.buf)
                c.buf = b""
                c._fill(time.monotonic() + 5)
            wait_until(lambda: r.in_flight() == 2, what="the big exchange in flight")
            victim.kill()
            t0 = time.monotonic()
            closed = False
            while time.monotonic() - t0 < 10:
                got += len(c.buf)
                c.buf = b""
                if not c._fill(time.monotonic() + 10):
                    closed = True
                    break
            self.assertTrue(closed, "client hung after the backend died")
            self.assertLess(got, 500_000_000)
            self.assertLess(time.monotonic() - t0, 5)
        r.wait_idle()
        # rondel still serves, on the surviving backend.
        self.assertEqual(http_get(r.port, "/after-kill")[0], 200)

    def test_bad_backend_responses_502_and_connection_not_pooled(self):
        b = self.backend("bad")
        r = self.rondel([b], pool={"retries": 2})

        def conns():
            return b.stats()["connections_total"]

        # Bad chunk framing before any byte reached the client: 502, client connection closed.
        for i in range(3):
            with HttpConn(r.port) as c:
                c.request("GET", f"/bad/{i}?fail=bad-framing&size=5000")
                self.assertEqual(c.read_response()[0], 502)
                self.assertTrue(c.closed_by_peer())
        # Extra bytes after a complete response: the client gets the response, but that backend
        # connection is closed, not pooled; each request needs a new backend connection.
        before = conns()
        for i in range(4):
            status, _, body = http_get(r.port, f"/extra/{i}?fail=extra-bytes&size=1000")
            self.assertEqual((status, len(body)), (200, 1000))
        # +1 for each request (none reused), +1 for this /_stats call.
        self.assertEqual(conns() - before, 4 + 1)
        # Healthy responses are pooled again: 5 requests, at most one new connection.
        before = conns()
        for i in range(5):
            self.assertEqual(http_get(r.port, f"/fine/{i}")[0], 200)
        self.assertLessEqual(conns() - before, 1 + 1)
        # A truncated body: the client sees a short body and a closed connection, never a hang.
        with HttpConn(r.port) as c:
            c.request("GET", "/trunc?fail=truncate-body&size=100000")
            with self.assertRaises(ConnectionError):
                c.read_response(timeout=5)
        r.wait_idle()

    def test_client_abort_mid_exchange_releases_counts(self):
        bs = [self.backend(f"slow{i}", "--delay-ms", "300") for i in range(2)]
        r = self.rondel(bs)
        conns = []
        for i in range(20):
            c = HttpConn(r.port)
            c.request("GET", f"/abort/{i}")
            conns.append(c)
        wait_until(lambda: r.in_flight() > 0, what="requests in flight")
        for c in conns:
            c.close()
        r.wait_idle(timeout=5)
        # Uploads cut off mid-body, too.
        for i in range(5):
            c = HttpConn(r.port)
            c.send(f"POST /cut/{i} HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n".encode()
                   + b"z" * 100000)
            wait_until(lambda: r.in_flight() > 0, what="the upload in flight")  # then cut it
            c.close()
        r.wait_idle(timeout=5)
        self.assertEqual(http_get(r.port, "/still")[0], 200)


if __name__ == "__main__":
    main()
