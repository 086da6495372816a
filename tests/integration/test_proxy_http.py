"""Proxy data path, HTTP semantics: keep-alive on both sides, HTTP/1.0, pipelining, bodiless
responses, 100-continue, header rewriting and re-framing, with raw sockets and curl."""
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import zlib

from harness import (Backend, HttpConn, Rondel, RondelTestCase, ScriptedBackend, access_records,
                     data_arrived_at, http_get, main, make_config, raw_exchange, parse_responses,
                     segment_arrived_at, wait_until)


class ProxyHttp(RondelTestCase):
    backend_names = [f"h{i}" for i in range(3)]
    backend_args = ("--checksum",)
    use_dir = True
    idle_after_each = True

    @classmethod
    def config(cls):
        cls.access = os.path.join(cls.dir, "access.log")
        return make_config(cls.backends, log={"access_log": cls.access})

    def by_name(self, name):
        return [b for b in self.backends if b.name == name][0]

    def test_client_keep_alive_many_requests_one_connection(self):
        with HttpConn(self.port) as c:
            for i in range(300):
                c.request("GET", f"/ka/{i % 37}?size={i % 50 + 1}")
                status, h, body = c.read_response()
                self.assertEqual(status, 200)
                self.assertEqual(len(body), i % 50 + 1)
                self.assertNotIn("connection", h)
            self.assertFalse(c.closed_by_peer(timeout=0.2))

    def test_backend_keep_alive_pool_reused(self):
        # Sequential requests, each on a new client connection: the backend side reuses pooled
        # connections, so connections_total stays small while requests grow.
        before = {b.name: b.stats() for b in self.backends}
        n = 300
        for i in range(n):
            status, _, _ = http_get(self.port, f"/pool/{i}")
            self.assertEqual(status, 200)
        after = {b.name: b.stats() for b in self.backends}
        requests = sum(after[k]["requests"] - before[k]["requests"] for k in after)
        # The /_stats calls themselves are control requests, not counted in "requests".
        self.assertEqual(requests, n)
        for k in after:
            new_conns = after[k]["connections_total"] - before[k]["connections_total"]
            # One busy connection at a time per backend, plus this stats call's own connection.
            self.assertLessEqual(new_conns, 3, f"{k}: {new_conns} new backend connections")

    def test_http10_without_keep_alive_closes(self):
        with HttpConn(self.port) as c:
            c.send(b"GET /one HTTP/1.0\r\n\r\n")
            status, h, body = c.read_response()
            self.assertEqual(status, 200)
            self.assertEqual(h.get("connection", "").lower(), "close")
            self.assertTrue(c.closed_by_peer())

    def test_http10_keep_alive_when_asked(self):
        with HttpConn(self.port) as c:
            for i in range(5):
                c.send(f"GET /ka10/{i} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".encode())
                status, h, _ = c.read_response()
                self.assertEqual(status, 200)
                self.assertEqual(h.get("connection", "").lower(), "keep-alive")
            c.send(b"GET /last HTTP/1.0\r\n\r\n")
            status, h, _ = c.read_response()
            self.assertEqual(status, 200)
            self.assertTrue(c.closed_by_peer())

    def test_http10_chunked_backend_response_is_close_delimited(self):
        with HttpConn(self.port) as c:
            c.send(b"GET /c10?chunked=1&size=100000 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, h, body = c.read_response()
            self.assertEqual(status, 200)
            self.assertNotIn("transfer-encoding", h)
            self.assertEqual(len(body), 100000)
            self.assertTrue(c.eof)

    def test_http11_chunked_and_length_responses(self):
        with HttpConn(self.port) as c:
            c.request("GET", "/c11?chunked=1&size=70000")
            status, h, body = c.read_response()
            self.assertEqual(h.get("transfer-encoding"), "chunked")
            self.assertEqual(len(body), 70000)
            c.request("GET", "/c11?size=70000")
            status, h, body = c.read_response()
            self.assertEqual(h.get("content-length"), "70000")
            self.assertEqual(len(body), 70000)

    def test_head_204_304_have_no_body(self):
        # Pipelined: if any bodiless response were given a body, the next would be misparsed.
        with HttpConn(self.port) as c:
            c.send(b"HEAD /h?size=1000 HTTP/1.1\r\nHost: t\r\n\r\n"
                   b"GET /h?status=204 HTTP/1.1\r\nHost: t\r\n\r\n"
                   b"GET /h?status=304 HTTP/1.1\r\nHost: t\r\n\r\n"
                   b"HEAD /h?size=1000&chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n"
                   b"GET /h?size=7 HTTP/1.1\r\nHost: t\r\n\r\n")
            s, h, b = c.read_response("HEAD")
            self.assertEqual((s, h.get("content-length"), b), (200, "1000", b""))
            self.assertEqual(c.read_response()[0], 204)
            self.assertEqual(c.read_response()[0], 304)
            s, h, b = c.read_response("HEAD")
            self.assertEqual((s, b), (200, b""))
            s, h, b = c.read_response()
            self.assertEqual((s, len(b)), (200, 7))
            # Any stray byte after the last response would come before the next one and spoil
            # its status line; nothing is left over once it is read.
            c.request("GET", "/h?size=3")
            self.assertEqual(c.read_response()[:1] + (c.buf,), (200, b""))

    def test_pipelined_answered_in_order_slow_first(self):
        with HttpConn(self.port) as c:
            t0 = time.monotonic()
            reqs = [("/pipe/a?delay=400&size=11", 11), ("/pipe/b?size=22", 22),
                    ("/pipe/c?size=33&chunked=1", 33), ("/pipe/d?size=44", 44)]
            c.send(b"".join(f"GET {t} HTTP/1.1\r\nHost: t\r\n\r\n".encode() for t, _ in reqs))
            for t, n in reqs:
                status, h, body = c.read_response()
                self.assertEqual(status, 200)
                self.assertEqual(len(body), n, f"response out of order for {t}")
            self.assertGreaterEqual(time.monotonic() - t0, 0.39)

    def test_100_continue(self):
        body = os.urandom(50000)
        with HttpConn(self.port) as c:
            c.send(b"POST /cont HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                   b"Content-Length: 50000\r\n\r\n")
            status, _, _ = c.read_head(timeout=3)
            self.assertEqual(status, 100)
            c.send(body)
            status, h, _ = c.read_response()
            self.assertEqual(status, 200)
            self.assertEqual(int(h["x-request-bytes"]), 50000)
            self.assertEqual(int(h["x-request-crc32"], 16), zlib.crc32(body))
            # Only one interim response reaches the client.
            c.request("GET", "/after-continue")
            self.assertEqual(c.read_response()[0], 200)

    def test_headers_rewritten(self):
        with HttpConn(self.port) as c:
            c.send(b"GET /_echo HTTP/1.1\r\nHost: example.test:8080\r\n"
                   b"Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\n"
                   b"TE: trailers\r\nProxy-Connection: keep-alive\r\nUpgrade-Insecure-Requests: 1\r\n"
                   b"X-Forwarded-For: 10.1.2.3\r\nX-Forwarded-Proto: https\r\nX-End: kept\r\n\r\n")
            status, _, body = c.read_response()
        self.assertEqual(status, 200)
        head = body.decode("latin-1").lower()
        self.assertIn("host: example.test:8080\r\n", head)
        self.assertIn("x-forwarded-for: 10.1.2.3, 127.0.0.1\r\n", head)
        self.assertIn("x-forwarded-proto: http\r\n", head)
        self.assertEqual(head.count("x-forwarded-proto"), 1)
        self.assertIn("x-end: kept\r\n", head)
        self.assertIn("upgrade-insecure-requests: 1\r\n", head)
        for hop in ("x-hop:", "keep-alive:", "te:", "\r\nconnection:", "proxy-connection:"):
            self.assertNotIn(hop, head)
        self.assertTrue(head.startswith("get /_echo http/1.1\r\n"))

    def test_chunked_request_body_reframed(self):
        data = os.urandom(300000)
        chunks = [data[i:i + 7000] for i in range(0, len(data), 7000)]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(x), x) for x in chunks) + b"0\r\n\r\n"
        with HttpConn(self.port) as c:
            c.send(b"POST /up-chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                   framed)
            status, h, _ = c.read_response()
            self.assertEqual(status, 200)
            self.assertEqual(int(h["x-request-bytes"]), len(data))
            self.assertEqual(int(h["x-request-crc32"], 16), zlib.crc32(data))
            # The connection stays usable after a chunked upload.
            c.request("GET", "/after-chunked")
            self.assertEqual(c.read_response()[0], 200)

    def test_curl(self):
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-o", "/dev/null",
                            "-o", "/dev/null", "-w",
                            "%{http_code} %{num_connects}\\n",
                            f"http://127.0.0.1:{self.port}/curl/1",
                            f"http://127.0.0.1:{self.port}/curl/2",
                            f"http://127.0.0.1:{self.port}/curl/3"],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.split()
        # Three transfers: 200 each, one connection (the later two reuse it).
        self.assertEqual(lines, ["200", "1", "200", "0", "200", "0"])
        data = os.urandom(200000)
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "-D", "-", "-o", "/dev/null",
                            "--data-binary", "@-", "-H", "Content-Type: application/octet-stream",
                            f"http://127.0.0.1:{self.port}/curl/post"],
                           input=data, capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        head = r.stdout.decode("latin-1").lower()
        self.assertIn("x-request-crc32: %08x" % zlib.crc32(data), head)

    def test_access_log_line_per_request(self):
        with HttpConn(self.port) as c:
            c.request("POST", "/logged/1?size=123", body=b"q" * 1000,
                      headers={"X-Forwarded-For": "192.0.2.9"})
            self.assertEqual(c.read_response()[0], 200)
        target = "/logged/1?size=123"
        rec = wait_until(lambda: [x for x in access_records(self.access, timeout=0)
                                  if x["target"] == target], timeout=3, what="the access line")
        self.assertEqual(len(rec), 1)
        x = rec[0]
        owner = self.rondel.route("p", target)["owner"]
        self.assertEqual((x["client"], x["method"], x["status"], x["outcome"]),
                         ("127.0.0.1", "POST", "200", "ok"))
        self.assertEqual((x["backend"], x["owner"], x["hops"], x["attempts"]), (owner, owner, "0", "1"))
        self.assertGreaterEqual(int(x["bytes_in"]), 1000)
        self.assertGreaterEqual(int(x["bytes_out"]), 123)
        self.assertGreater(int(x["duration_us"]), 0)

    def test_half_close_after_pipelined_requests(self):
        # The client sends two requests and shuts down its sending side: both are answered.
        data = raw_exchange(self.port, b"GET /hc/1?size=5 HTTP/1.1\r\nHost: t\r\n\r\n"
                                       b"GET /hc/2?size=6 HTTP/1.1\r\nHost: t\r\n\r\n",
                            timeout=5, shutdown_write=True)
        rs = parse_responses(data)
        self.assertEqual([(s, len(b)) for s, _, b in rs], [(200, 5), (200, 6)])


@unittest.skipUnless(socket.has_ipv6, "no IPv6")
class ProxyIpv6Client(unittest.TestCase):
    """A client on IPv6: its address reaches X-Forwarded-For and the access log as text."""

    def test_ipv6_client_address_forwarded_and_logged(self):
        try:
            probe = socket.socket(socket.AF_INET6)
            probe.bind(("::1", 0))
            probe.close()
        except OSError:
            self.skipTest("no ::1 on this machine")
        backend = Backend("v6")
        access = os.path.join(tempfile.mkdtemp(prefix="rondel-v6-"), "access.log")
        cfg = make_config([backend], log={"access_log": access}).replace(
            "bind: 127.0.0.1:0\n    pool", "bind: \"[::1]:0\"\n    pool", 1)
        rondel = Rondel(cfg)
        try:
            for i in range(3):  # each request takes the pooled exchange state afresh
                with socket.create_connection(("::1", rondel.port), timeout=5) as c:
                    c.sendall(b"GET /_echo?i=%d HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 192.0.2.1\r\n"
                              b"Connection: close\r\n\r\n" % i)
                    data = b""
                    while chunk := c.recv(65536):
                        data += chunk
                self.assertIn(b" 200 ", data.split(b"\r\n", 1)[0])
                self.assertIn("x-forwarded-for: 192.0.2.1, ::1\r\n", data.decode("latin-1").lower())
            def lines():
                r = [x for x in access_records(access, timeout=0) if x["target"].startswith("/_echo?i=")]
                return r if len(r) == 3 else None
            rec = wait_until(lines, timeout=3, what="three access lines")
            self.assertEqual({x["client"] for x in rec}, {"::1"})
        finally:
            self.assertEqual(rondel.stop(), 0)
            backend.stop()


class ProxyForwardedHeadersOff(unittest.TestCase):
    """forwarded_headers: false (HAProxy without `option forwardfor`): rondel adds no
    X-Forwarded-For / X-Forwarded-Proto and passes the client's own unchanged."""

    def test_client_forwarded_fields_pass_unchanged(self):
        backend = Backend("f")
        rondel = Rondel(make_config([backend], listener={"forwarded_headers": "false"}))
        try:
            with HttpConn(rondel.port) as c:
                c.send(b"GET /_echo HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 10.1.2.3\r\n"
                       b"X-Forwarded-Proto: https\r\n\r\n")
                status, _, body = c.read_response()
                self.assertEqual(status, 200)
                head = body.decode("latin-1").lower()
                self.assertIn("x-forwarded-for: 10.1.2.3\r\n", head)
                self.assertIn("x-forwarded-proto: https\r\n", head)
                self.assertNotIn("127.0.0.1", head)
                c.send(b"GET /_echo HTTP/1.1\r\nHost: t\r\n\r\n")
                status, _, body = c.read_response()
                self.assertEqual(status, 200)
                self.assertNotIn("x-forwarded", body.decode("latin-1").lower())
        finally:
            self.assertEqual(rondel.stop(), 0)
            backend.stop()


class ProxyTimeoutsAndLimits(RondelTestCase):
    """Idle timeouts on both sides and the per-backend connection limit."""

    @classmethod
    def start_backends(cls):
        cls.backend = Backend("lim", "--delay-ms", "300")
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config(
            [cls.backend],
            listener={"idle_timeout": "400ms"},
            pool={"backend_idle_timeout": "400ms", "max_connections_per_backend": 2,
                  "max_idle_per_backend": 2})

    def test_client_idle_timeout(self):
        with HttpConn(self.rondel.port) as c:
            sent = time.monotonic()
            c.request("GET", "/idle?delay=0")
            self.assertEqual(c.read_response()[0], 200)
            self.assertTrue(c.closed_by_peer(timeout=3))
            closed = time.monotonic()
            # The kernel's arrival times of the response and of the FIN after it: how late this
            # thread woke to read either does not count.
            response_at, fin_at = data_arrived_at(c.sock), segment_arrived_at(c.sock)
        # Not before the timeout: the server's clock starts once it has the request, after
        # `sent` (this bound has no noise: only a later wake-up can move it, and that way).
        self.assertGreaterEqual(closed - sent, 0.4 - 0.002,
                                f"closed {closed - sent:.3f}s after the request")
        # Not much after it, from the response's arrival to the FIN's. A close by reset would
        # leave fin_at at the response's arrival.
        self.assertGreater(fin_at, response_at, "the close came as a reset, not a FIN")
        self.assertLess(fin_at - response_at, 0.4 + 0.6,
                        f"FIN {fin_at - response_at:.3f}s after the response")

    def test_backend_idle_timeout_closes_pooled_connection(self):
        # The pooled connection is visible only until its 400 ms idle timeout: the admin API's
        # answer shows it for sure when it came back within 400 ms of sending the request. On a
        # machine busy enough to take longer, the observation is made again (bounded tries).
        for _ in range(5):
            sent = time.monotonic()
            self.assertEqual(http_get(self.rondel.port, "/bidle?delay=0")[0], 200)
            pool = self.rondel.pools()["pools"][0]["backends"][0]
            if time.monotonic() - sent < 0.4:
                break
        else:
            self.fail("no request and admin answer within 400 ms in 5 tries")
        self.assertEqual(pool["idle_connections"], 1)
        wait_until(lambda: self.rondel.pools()["pools"][0]["backends"][0]["open_connections"] == 0,
                   timeout=2, what="the pooled connection to time out")
        # The backend saw it close too (its own /_stats connection is the one left open).
        wait_until(lambda: self.backend.stats()["connections_open"] == 1, timeout=2,
                   what="the backend to see the close")

    def test_max_connections_per_backend(self):
        # The backend holds every request until the test releases it, so the two the limit lets
        # through are still in flight while the other four arrive, however the machine
        # schedules the six clients (a fixed backend delay raced their start-up).
        release = threading.Event()
        held = []
        lock = threading.Lock()

        def hold(method, target, head, body):
            with lock:
                held.append(target)
            release.wait(10)
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False

        backend = ScriptedBackend(hold)
        rondel = Rondel(make_config([{"address": backend.address}],
                                    pool={"max_connections_per_backend": 2}))
        results = []

        def one(i):
            try:
                status = http_get(rondel.port, f"/lim/{i}", timeout=15)[0]
            except Exception as e:  # noqa: BLE001
                status = repr(e)
            with lock:
                results.append(status)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        try:
            for t in threads:
                t.start()
            # Two are held by the backend (the limit); the other four find no backend with a
            # free connection and are answered 503 while the two are still held.
            wait_until(lambda: len(results) == 4 and len(held) == 2, timeout=10,
                       what="four answers while two requests are held")
            self.assertEqual(results, [503] * 4)
        finally:
            release.set()
            for t in threads:
                t.join(timeout=15)
        self.assertEqual(sorted(results), [200, 200, 503, 503, 503, 503])
        self.assertEqual(len(held), 2)
        self.assertLessEqual(backend.connections, 2)
        rondel.wait_idle()
        self.assertEqual(rondel.stop(), 0)
        backend.stop()


if __name__ == "__main__":
    main()
