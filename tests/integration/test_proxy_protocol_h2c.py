"""PROXY protocol on a prior-knowledge HTTP/2 listener (`http2: prior_knowledge` together with
`proxy_protocol`), which took no PROXY header at all before 2026-12-04 (issue 32, item 1):

- `curl --haproxy-protocol --http2-prior-knowledge` is served over HTTP/2;
- a v1 and a v2 header carry addresses that the backend sees in X-Forwarded-For;
- a connection without a PROXY header (the h2 preface straight away) is closed without a frame
  and never reaches a backend, and is counted as a missing header; so is one from outside
  `trusted`, and a silent one is closed at header_timeout;
- the server preface waits for the header: rondel sends nothing before it.
"""
import select
import shutil
import socket
import subprocess
import time
import unittest

from h2_raw import (DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, SETTINGS, frame, literal,
                    read_frames_until)
from harness import Backend, Rondel, main, make_config, metric_sum, scrape
from test_proxy_protocol import v1, v2, xff

HEADER_TIMEOUT_S = 1.0


def h2_echo(port, proxy_header, path="/_echo"):
    """Sends proxy_header, the h2 preface and one GET; returns the response body (the echoed
    request head) or None when rondel closed without answering."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        block = b"\x82\x86" + literal(4, path) + literal(1, "pp.example")
        s.sendall(proxy_header + PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
        frames, _ = read_frames_until(
            s, lambda f: f[0] == DATA and f[2] == 1 and f[1] & END_STREAM, limit_s=10)
        body = b"".join(p for t, _, sid, p in frames if t == DATA and sid == 1)
        return body if frames else None
    finally:
        s.close()


class ProxyProtocolH2c(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("b0")
        text = make_config(
            [cls.backend],
            listener={"proxy_protocol": "{ trusted: [127.0.0.0/8, '::1/128'] }",
                      "http2": "prior_knowledge",
                      "header_timeout": f"{int(HEADER_TIMEOUT_S * 1000)}ms"})
        text = text.replace("pools:\n", "  - { name: far, bind: 127.0.0.1:0, pool: p, "
                            "http2: prior_knowledge, "
                            "proxy_protocol: { trusted: [10.0.0.0/8] } }\npools:\n", 1)
        cls.rondel = Rondel(text)
        cls.port = cls.rondel.ports["web"]

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        cls.backend.stop()
        assert code == 0, code

    def rejects(self, reason, listener="web"):
        _, samples, _ = scrape(self.rondel.admin_port)
        return metric_sum(samples, "rondel_proxy_protocol_rejects_total", listener=listener,
                          reason=reason)

    def backend_requests(self):
        _, samples, _ = scrape(self.rondel.admin_port)
        return metric_sum(samples, "rondel_requests_total")

    @unittest.skipIf(shutil.which("curl") is None, "curl is not installed")
    def test_curl_haproxy_protocol_over_h2c(self):
        out = subprocess.run(
            ["curl", "-sS", "--max-time", "10", "--haproxy-protocol", "--http2-prior-knowledge",
             "-o", "-", "-w", "\n%{http_version} %{http_code}",
             f"http://127.0.0.1:{self.port}/_echo?m=curl"],
            capture_output=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.endswith(b"\n2 200"), out.stdout[-200:])
        self.assertIn(b"X-Forwarded-For: 127.0.0.1\r\n", out.stdout)

    def test_carried_addresses_reach_the_backend(self):
        for name, header, want in (("v1", v1("203.0.113.9"), "203.0.113.9"),
                                   ("v2", v2("2001:db8:1::77", "2001:db8::1"), "2001:db8:1::77")):
            with self.subTest(name):
                body = h2_echo(self.port, header)
                self.assertIsNotNone(body, "no answer")
                self.assertEqual(xff(body), want)

    def test_no_proxy_header_is_refused_before_any_frame(self):
        before_bad, before_sent = self.rejects("missing"), self.backend_requests()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            block = b"\x82\x86" + literal(4, "/_echo") + literal(1, "pp.example")
            s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                      frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
            got = b""
            s.settimeout(5)
            try:
                while chunk := s.recv(65536):
                    got += chunk
            except (ConnectionResetError, socket.timeout):
                pass
        finally:
            s.close()
        self.assertEqual(got, b"", "rondel answered a connection that sent no PROXY header")
        self.assertEqual(self.rejects("missing"), before_bad + 1)
        self.assertEqual(self.backend_requests(), before_sent)

    def test_untrusted_peer_is_closed(self):
        before = self.rejects("untrusted", listener="far")
        s = socket.create_connection(("127.0.0.1", self.rondel.ports["far"]), timeout=10)
        try:
            s.sendall(v1("203.0.113.9") + PREFACE)
            s.settimeout(5)
            try:
                self.assertEqual(s.recv(65536), b"")
            except ConnectionResetError:
                pass
        finally:
            s.close()
        self.assertEqual(self.rejects("untrusted", listener="far"), before + 1)

    def test_silent_connection_closed_at_header_timeout_without_a_frame(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            start = time.monotonic()
            readable, _, _ = select.select([s], [], [], HEADER_TIMEOUT_S + 5)
            self.assertTrue(readable, "not closed at header_timeout")
            try:
                self.assertEqual(s.recv(65536), b"", "rondel sent bytes before a PROXY header")
            except ConnectionResetError:
                pass
            elapsed = time.monotonic() - start
            self.assertGreater(elapsed, HEADER_TIMEOUT_S * 0.8)
            self.assertLess(elapsed, HEADER_TIMEOUT_S + 3)
        finally:
            s.close()


if __name__ == "__main__":
    main()
