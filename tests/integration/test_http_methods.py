"""Request methods and targets through the real rondel (issue 13, defect 10): every RFC 9110
token method reaches the backend with the method, target and body intact (llhttp 8.1 alone
answered BAN, QUERY and custom methods with 400); a method rondel does not know is not
idempotent, so it is never sent twice; an absolute-form target with userinfo gets 400 and a
close, and neither it nor a request pipelined behind it reaches the backend."""
import subprocess
import threading
import unittest

from harness import HttpConn, Rondel, RondelTestCase, ScriptedBackend, main, make_config, wait_until


class Recorder:
    """A ScriptedBackend handler that keeps (method, target, body) of every request. Targets
    starting with /drop are read and then dropped: the connection closes with no response."""

    def __init__(self, name):
        self.name = name
        self.seen = []
        self.lock = threading.Lock()

    def __call__(self, method, target, head, body):
        with self.lock:
            self.seen.append((method, target, body))
        if target.startswith("/drop"):
            return b"", True
        text = f"{self.name} {method} {target}".encode()
        return (b"HTTP/1.1 200 OK\r\nX-Seen-Method: " + method.encode() +
                b"\r\nContent-Length: " + str(len(text)).encode() + b"\r\n\r\n" + text), False

    def targets(self):
        with self.lock:
            return [t for _, t, _ in self.seen]


class TokenMethods(RondelTestCase):
    idle_after_each = True

    @classmethod
    def start_backends(cls):
        cls.recorder = Recorder("b1")
        cls.backend = ScriptedBackend(cls.recorder)
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config([{"address": cls.backend.address}])

    def test_token_methods_reach_the_backend_intact(self):
        cases = [("BAN", "/obj/1", b""), ("QUERY", "/search?x=1", b"select=all"),
                 ("X-Purge.All_v2", "/p", b""), ("PROPFIND", "/dav/", b"<propfind/>"),
                 ("get", "/lower", b"")]
        with HttpConn(self.rondel.port) as c:
            for method, target, body in cases:
                with self.subTest(method=method):
                    c.request(method, target, body=body)
                    status, headers, got = c.read_response()
                    self.assertEqual(status, 200)
                    self.assertEqual(headers.get("x-seen-method"), method)
                    self.assertEqual(got, f"b1 {method} {target}".encode())
                    self.assertIn((method, target, body), self.recorder.seen)

    def test_curl_x_ban(self):
        out = subprocess.run(["curl", "-sS", "--max-time", "10", "-X", "BAN",
                              f"http://127.0.0.1:{self.rondel.port}/curl/ban"],
                             capture_output=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, b"b1 BAN /curl/ban")

    def test_userinfo_target_is_400_closed_and_never_forwarded(self):
        before = self.backend.requests
        with HttpConn(self.rondel.port) as c:
            c.send(b"GET http://user:pw@cache.example/secret HTTP/1.1\r\nHost: cache.example\r\n"
                   b"\r\nGET /after-userinfo HTTP/1.1\r\nHost: cache.example\r\n\r\n")
            status, headers, _ = c.read_response()
            self.assertEqual(status, 400)
            self.assertEqual(headers.get("connection"), "close")
            self.assertTrue(c.closed_by_peer())
        # A request after it, on a new connection, is answered: everything before it has been
        # handled, and the backend saw neither the userinfo request nor the pipelined one.
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/marker")
            self.assertEqual(c.read_response()[0], 200)
        self.assertEqual(self.backend.requests, before + 1)
        targets = self.recorder.targets()
        self.assertIn("/marker", targets)
        self.assertFalse([t for t in targets if "user" in t or t == "/after-userinfo"], targets)


class UnknownMethodNotRetried(unittest.TestCase):
    """Two backends that read a request and close without answering: a GET (idempotent) is
    tried on the second, a BAN is sent once and answered 502 (docs/reliability.md, retries)."""

    def test_unknown_method_is_sent_once(self):
        recorders = [Recorder("d1"), Recorder("d2")]
        backends = [ScriptedBackend(r) for r in recorders]
        rondel = Rondel(make_config([{"address": b.address} for b in backends],
                                    pool={"retries": 2}))
        try:
            def attempts(target):
                return sum(r.targets().count(target) for r in recorders)

            with HttpConn(rondel.port) as c:
                c.request("BAN", "/drop/ban")
                self.assertEqual(c.read_response()[0], 502)
            self.assertEqual(attempts("/drop/ban"), 1)
            with HttpConn(rondel.port) as c:
                c.request("GET", "/drop/get")
                self.assertIn(c.read_response()[0], (502, 503))  # 503 once retries run out
            # The contrast: the idempotent GET went to both backends.
            wait_until(lambda: attempts("/drop/get") == 2, what="GET tried on both backends")
            self.assertEqual(attempts("/drop/ban"), 1)
        finally:
            assert rondel.stop() == 0
            for b in backends:
                b.stop()


if __name__ == "__main__":
    main()
