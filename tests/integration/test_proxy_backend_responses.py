"""Proxy data path, unusual and bad backend responses from a scripted Python backend:
close-delimited bodies re-framed, interim 1xx passed on, malformed heads -> 502 with the backend
connection closed and never pooled, bytes a bodiless response must not have are never forwarded."""
import socket
import threading
import time
import unittest

from harness import HttpConn, Rondel, RondelTestCase, ScriptedBackend, main, make_config

BODY = b"0123456789" * 5000  # 50000 bytes


def handler(method, target, head, body):
    path = target.split("?")[0]
    if path == "/close-delimited":
        return b"HTTP/1.1 200 OK\r\nX-Mode: cd\r\n\r\n" + BODY, True
    if path == "/early-hints":
        return (b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), False
    if path == "/bad-status":
        return b"HTTP/1.1 2x0 Nope\r\nContent-Length: 2\r\n\r\nok", False
    if path == "/cl-and-te":
        return (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"2\r\nok\r\n0\r\n\r\n"), False
    if path == "/two-cl":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!", False
    if path == "/huge-head":
        return (b"HTTP/1.1 200 OK\r\nX-Big: " + b"h" * 100000 +
                b"\r\nContent-Length: 2\r\n\r\nok"), False
    if path == "/not-http":
        return b"SSH-2.0-OpenSSH_9.6\r\n", False
    if path == "/conn-close":
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", False
    if path == "/http10":
        return b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False
    if path == "/head-with-body":
        # A HEAD answered with a body (a backend bug): those bytes are not the next response.
        return b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody", False
    if path == "/204-with-body":
        return b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\nstray", False
    if path == "/ok":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False


class ProxyBackendResponses(RondelTestCase):
    @classmethod
    def start_backends(cls):
        cls.backend = ScriptedBackend(handler)
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config([{"address": cls.backend.address}], pool={"retries": 2})

    def tearDown(self):
        self.rondel.wait_idle()

    def new_backend_conns(self, fn):
        """How many backend connections rondel opened while running fn()."""
        # Warm: make sure one healthy pooled connection exists first.
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/ok")
            self.assertEqual(c.read_response()[0], 200)
        before = self.backend.connections
        fn()
        time.sleep(0.05)
        return self.backend.connections - before

    def test_close_delimited_to_http11_is_chunked(self):
        def run():
            with HttpConn(self.rondel.port) as c:
                c.request("GET", "/close-delimited")
                status, h, body = c.read_response()
                self.assertEqual((status, body), (200, BODY))
                self.assertEqual(h.get("transfer-encoding"), "chunked")
                c.request("GET", "/ok")  # the client connection stays usable
                self.assertEqual(c.read_response()[2], b"ok")
        # The pooled connection was used and then closed by the backend: the /ok after it needs
        # a new backend connection.
        self.assertEqual(self.new_backend_conns(run), 1)

    def test_close_delimited_to_http10(self):
        with HttpConn(self.rondel.port) as c:
            c.send(b"GET /close-delimited HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, h, body = c.read_response()
            self.assertEqual((status, body), (200, BODY))
            self.assertTrue(c.eof)

    def test_interim_103_passed_on(self):
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/early-hints")
            status, h, _ = c.read_head()
            self.assertEqual(status, 103)
            self.assertIn("link", h)
            status, _, body = c.read_response()
            self.assertEqual((status, body), (200, b"ok"))

    def test_malformed_responses_502_not_pooled(self):
        for path in ("/bad-status", "/cl-and-te", "/two-cl", "/huge-head", "/not-http"):
            with self.subTest(path=path):
                def run():
                    with HttpConn(self.rondel.port) as c:
                        c.request("GET", path)
                        status, _, _ = c.read_response()
                        self.assertEqual(status, 502, path)
                        self.assertTrue(c.closed_by_peer())
                    # The next request must not reuse the broken connection.
                    with HttpConn(self.rondel.port) as c:
                        c.request("GET", "/ok")
                        self.assertEqual(c.read_response()[2], b"ok")
                self.assertEqual(self.new_backend_conns(run), 1, path)

    def test_backend_close_or_http10_not_pooled(self):
        for path in ("/conn-close", "/http10"):
            with self.subTest(path=path):
                def run():
                    with HttpConn(self.rondel.port) as c:
                        c.request("GET", path)
                        self.assertEqual(c.read_response()[2], b"ok")
                        c.request("GET", "/ok")
                        self.assertEqual(c.read_response()[2], b"ok")
                self.assertEqual(self.new_backend_conns(run), 1, path)

    def test_stray_bytes_after_bodiless_response(self):
        for method, path, want in (("HEAD", "/head-with-body", 200), ("GET", "/204-with-body", 204)):
            with self.subTest(path=path):
                def run():
                    with HttpConn(self.rondel.port) as c:
                        c.request(method, path)
                        status, _, body = c.read_response(method)
                        self.assertEqual((status, body), (want, b""))
                        c.request("GET", "/ok")
                        status, _, body = c.read_response()
                        self.assertEqual((status, body), (200, b"ok"))
                        time.sleep(0.05)
                        self.assertEqual(c.buf, b"")
                self.assertEqual(self.new_backend_conns(run), 1, path)


def early_handler(method, target, head, body):
    # Answers after the head, without reading the body; "late": after the unread body has
    # filled the socket buffers, so rondel's body write to the backend is pending.
    if "late" in target:
        time.sleep(0.5)
    if "close" in target:
        return (b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
                b"no\n"), True
    return b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", False


class ProxyEarlyResponse(unittest.TestCase):
    """A backend answers before the request body is sent: the client gets that answer at once
    with Connection: close, the rest of the body is not forwarded, the connection then closes."""

    def test_early_response_during_upload(self):
        backend = ScriptedBackend(early_handler, read_body=False)
        r = Rondel(make_config([{"address": backend.address}], pool={"retries": 0}))
        try:
            for path, want in (("/early-close", 413), ("/early-keep", 200),
                               ("/early-close-late", 413), ("/early-keep-late", 200)):
                with self.subTest(path=path):
                    c = HttpConn(r.port, timeout=10)
                    t0 = time.monotonic()
                    c.send(f"POST {path} HTTP/1.1\r\nHost: t\r\n"
                           f"Content-Length: 50000000\r\n\r\n".encode())

                    def upload():
                        try:
                            for _ in range(50):
                                c.sock.sendall(b"x" * 1000000)
                        except OSError:
                            pass

                    t = threading.Thread(target=upload, daemon=True)
                    t.start()
                    status, h, _ = c.read_response()
                    self.assertEqual(status, want)
                    self.assertEqual(h.get("connection"), "close")
                    self.assertTrue(c.closed_by_peer(timeout=5))
                    self.assertLess(time.monotonic() - t0, 4)
                    c.sock.shutdown(socket.SHUT_RDWR)
                    t.join(timeout=5)
                    c.close()
                    r.wait_idle()
        finally:
            self.assertEqual(r.stop(), 0)
            backend.stop()


if __name__ == "__main__":
    main()
