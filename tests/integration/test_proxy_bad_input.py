"""Proxy data path, bad client input: each malformed or refused request gets its status
(400/408/413/414/431/501/505), the connection is closed, and the backend receives nothing:
neither the bad request nor anything pipelined after it (backend /_stats and --ledger)."""
import os
import time

from harness import (Backend, HttpConn, RondelTestCase, access_records, data_arrived_at, http_get,
                     main, make_config, read_ledger, timer_on_time, wait_until)

CASES = [
    # (name, raw request bytes, expected status)
    ("no_host", b"GET /x HTTP/1.1\r\n\r\n", 400),
    ("two_hosts", b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("cl_and_te", b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("two_content_lengths", b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                            b"Content-Length: 6\r\n\r\nhello!", 400),
    ("bad_content_length", b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", 400),
    ("te_not_chunked", b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ("space_before_colon", b"GET /x HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    ("obs_fold", b"GET /x HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n  folded\r\n\r\n", 400),
    ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n", 400),
    ("bare_lf_in_header", b"GET /x HTTP/1.1\r\nHost: t\r\nX-A: a\nb\r\n\r\n", 400),
    ("uri_too_long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
    ("header_too_large", b"GET /x HTTP/1.1\r\nHost: t\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n",
     431),
    ("too_many_headers", b"GET /x HTTP/1.1\r\nHost: t\r\n" +
     b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n", 431),
    ("body_too_large", b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n" +
     b"z" * 5000, 413),
    ("http_2_0", b"GET /x HTTP/2.0\r\nHost: t\r\n\r\n", 505),
    ("http_0_9_style", b"GET /x HTTP/3.1\r\nHost: t\r\n\r\n", 505),
    ("upgrade_websocket", b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                          b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZQ==\r\n"
                          b"Sec-WebSocket-Version: 13\r\n\r\n", 501),
    ("upgrade_h2c", b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                    b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", 501),
    ("connect", b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n", 501),
]

# Appended after every bad request, in the same write: must never be forwarded.
AFTER = b"GET /smuggled-after HTTP/1.1\r\nHost: t\r\n\r\n"


class ProxyBadInput(RondelTestCase):
    use_dir = True

    @classmethod
    def start_backends(cls):
        cls.ledgers = [os.path.join(cls.dir, f"ledger{i}") for i in range(2)]
        return [Backend(f"v{i}", "--ledger", cls.ledgers[i]) for i in range(2)]

    @classmethod
    def config(cls):
        cls.access = os.path.join(cls.dir, "access.log")
        return make_config(
            cls.backends, log={"access_log": cls.access},
            listener={"max_body_bytes": "1KiB", "max_request_line": "8KiB",
                      "max_header_bytes": "32KiB", "max_headers": 100,
                      "header_timeout": "500ms"})

    def backend_requests(self):
        return sum(b.stats()["requests"] for b in self.backends)

    def ledger_lines(self):
        return sum(len(read_ledger(p)) for p in self.ledgers)

    def check_refused(self, name, data, want, after=AFTER):
        before = self.backend_requests()
        ledger_before = self.ledger_lines()
        with HttpConn(self.rondel.port, timeout=5) as c:
            try:
                c.send(data + after)
            except (BrokenPipeError, ConnectionResetError):
                pass
            status, h, body = c.read_response()
            self.assertEqual(status, want, name)
            self.assertEqual(h.get("connection", "").lower(), "close", name)
            self.assertTrue(c.closed_by_peer(timeout=3), f"{name}: connection left open")
            self.assertEqual(c.buf, b"", f"{name}: bytes after the error response")
        time.sleep(0.05)
        self.assertEqual(self.backend_requests(), before, f"{name}: the backend got a request")
        self.assertEqual(self.ledger_lines(), ledger_before, f"{name}: the backend ledger grew")
        self.rondel.wait_idle()

    def mark(self, tag):
        """Index just past the access line of a good request to /_mark/TAG, once it is in the
        log: every line before it is from earlier requests (one worker writes them in order)."""
        target = f"/_mark/{tag}"
        self.assertEqual(http_get(self.rondel.port, target)[0], 200)

        def logged():
            recs = access_records(self.access, timeout=0)
            at = [i for i, x in enumerate(recs) if x["target"] == target]
            return at[-1] + 1 if at else None
        return wait_until(logged, timeout=10, what=f"the access line of {target}")

    def test_each_bad_request(self):
        # The access log is written in batches (every 200 ms): a marker request before and one
        # after the cases delimit their lines, whenever earlier lines land.
        n = self.mark("before")
        for name, data, want in CASES:
            with self.subTest(case=name):
                self.check_refused(name, data, want)
        # One access-log line per refused request, and none for what followed each.
        end = self.mark("after") - 1
        recs = access_records(self.access, timeout=0)[n:end]
        self.assertEqual([(x["status"], x["outcome"], x["backend"]) for x in recs],
                         [(str(want), "rejected", "-") for _, _, want in CASES])

    def test_bad_request_after_a_good_one_on_keep_alive(self):
        # A good request is answered, then the bad one on the same connection is refused and
        # nothing after it is forwarded.
        before = self.backend_requests()
        with HttpConn(self.rondel.port) as c:
            c.send(b"GET /good HTTP/1.1\r\nHost: t\r\n\r\n" + CASES[-1][1] + AFTER)
            self.assertEqual(c.read_response()[0], 200)
            self.assertEqual(c.read_response()[0], 501)
            self.assertTrue(c.closed_by_peer())
        time.sleep(0.05)
        self.assertEqual(self.backend_requests(), before + 1)
        self.assertNotIn("/smuggled-after",
                         [e[2] for p in self.ledgers for e in read_ledger(p)])

    def test_chunked_body_over_limit(self):
        # The limit is found only while streaming: 413 (nothing of the response was sent yet),
        # connection closed, and the backend never sees a complete request.
        chunk = b"y" * 600
        data = (b"POST /big-chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n")
        before = self.backend_requests()
        with HttpConn(self.rondel.port) as c:
            c.send(data + AFTER)
            status, _, _ = c.read_response()
            self.assertEqual(status, 413)
            self.assertTrue(c.closed_by_peer())
        self.rondel.wait_idle()
        time.sleep(0.1)
        completed = [e for p in self.ledgers for e in read_ledger(p)
                     if e[2] == "/big-chunked" and e[3] > 1024]
        self.assertEqual(completed, [], "more than max_body_bytes reached the backend")
        self.assertLessEqual(self.backend_requests(), before + 1)

    def test_bad_chunk_framing(self):
        before = self.backend_requests()
        with HttpConn(self.rondel.port) as c:
            c.send(b"POST /bad-chunk HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"zz\r\nhello\r\n0\r\n\r\n" + AFTER)
            status, _, _ = c.read_response()
            self.assertEqual(status, 400)
            self.assertTrue(c.closed_by_peer())
        self.rondel.wait_idle()
        self.assertNotIn("/smuggled-after",
                         [e[2] for p in self.ledgers for e in read_ledger(p)])
        self.assertLessEqual(self.backend_requests(), before + 1)

    def test_header_timeout_408(self):
        before = self.backend_requests()
        with HttpConn(self.rondel.port) as c:
            t0 = time.monotonic()
            c.send(b"GET /slow-head HTTP/1.1\r\nHost: t\r\n")
            sent = time.monotonic()
            status, _, _ = c.read_response(timeout=3)
            elapsed = time.monotonic() - t0
            # "Not late" by the 408's arrival in the kernel, not by when this thread woke to
            # read it; "not early" by the client's clock from before the head was sent.
            arrived = data_arrived_at(c.sock) - sent
            self.assertEqual(status, 408)
            self.assertTrue(c.closed_by_peer())
        self.assertIsNone(timer_on_time(elapsed, arrived, 0.5),
                          f"408 after {elapsed:.3f}s (arrived {arrived:.3f}s), want 0.5s")
        self.assertEqual(self.backend_requests(), before)

    def test_rejections_counted_and_no_crash(self):
        # After all of the above the daemon still serves and its counts are back to 0.
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/still-alive")
            self.assertEqual(c.read_response()[0], 200)
        self.rondel.wait_idle()
        self.assertIsNone(self.rondel.proc.poll())


if __name__ == "__main__":
    main()
