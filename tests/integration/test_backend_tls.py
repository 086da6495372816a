"""TLS to the backends of a pool (`tls` in a pool): a first rondel ("front") connects over TLS to
a second rondel's TLS listener ("terminator"), which serves a real test backend. A good
certificate gives 200 and keeps connections alive (backend handshakes < requests), a pool that
keeps no idle connection resumes the session it cached, the backend handshakes offer ALPN
http/1.1, health checks run over TLS too, a wrong server name or a wrong CA gives
502 and is counted as `verify`, `verify: false` accepts either, large bodies (which a plain
backend connection would splice) arrive whole, and a reload naming a bad CA file is refused with
FILE: reason while the old pools keep serving. Certificates are made in the test (tls_certs.py)."""
import os
import socket
import unittest
import zlib

from harness import (Backend, Rondel, http_get, http_request, main, metric_sum, scrape,
                     wait_until)
from tls_certs import Certs, tls_block

HS = "rondel_backend_tls_handshakes_total"


def front_config(port, certs, other_ca, extra_pool_tls="", proxy_port=None, silent_port=None):
    """Listeners good, fresh, wrongname, wrongca, noverify, each in front of its own pool."""
    pools = {
        "good": f"{{ verify: true, ca: {certs.ca}, sni: a.test }}",
        "fresh": f"{{ ca: {certs.ca}, sni: a.test }}",
        "wrongname": f"{{ ca: {certs.ca}, sni: b.test }}",
        "wrongca": f"{{ ca: {other_ca}, sni: a.test }}",
        "noverify": f"{{ verify: false, ca: {other_ca}, sni: b.test {extra_pool_tls}}}",
    }
    lines = ["listeners:"]
    for name in pools:
        lines += [f"  - name: {name}", "    bind: 127.0.0.1:0", f"    pool: {name}"]
    lines.append("pools:")
    # Pools without a listener: health checks over TLS, with the good and with a wrong name.
    check = "    health_check: { enabled: true, path: /healthz, interval: 100ms, timeout: 2s, rise: 1, fall: 1 }"
    for name, sni in (("checked", "a.test"), ("checkedbad", "b.test")):
        lines += [f"  - name: {name}", f"    tls: {{ ca: {certs.ca}, sni: {sni} }}", check,
                  f"    backends: [ {{ address: 127.0.0.1:{port} }} ]"]
    for name, tls in pools.items():
        lines += [f"  - name: {name}", f"    tls: {tls}", "    retries: 0",
                  f"    backends: [ {{ address: 127.0.0.1:{port} }} ]"]
        if name == "fresh":
            lines.append("    max_idle_per_backend: 0")
    if proxy_port is not None:
        # A PROXY v2 header ahead of the TLS handshake, to a listener that expects one.
        lines += ["  - name: proxied", f"    tls: {{ ca: {certs.ca}, sni: a.test }}",
                  "    send_proxy_protocol: v2",
                  f"    backends: [ {{ address: 127.0.0.1:{proxy_port} }} ]"]
        lines[1:1] = ["  - name: proxied", "    bind: 127.0.0.1:0", "    pool: proxied"]
    if silent_port is not None:
        # A backend that accepts TCP and never answers the ClientHello.
        lines += ["  - name: silent", f"    tls: {{ ca: {certs.ca}, sni: a.test }}",
                  "    connect_timeout: 300ms", "    retries: 0",
                  f"    backends: [ {{ address: 127.0.0.1:{silent_port} }} ]"]
        lines[1:1] = ["  - name: silent", "    bind: 127.0.0.1:0", "    pool: silent"]
    lines += ["admin:", "  bind: 127.0.0.1:0", "log:", "  level: info"]
    return "\n".join(lines) + "\n"


class BackendTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = Certs()
        cls.a = cls.certs.leaf("a", ["a.test"])
        cls.other_ca = cls.certs._ca("other", "another CA")
        cls.backend = Backend("b0")
        term = "\n".join([
            "listeners:", "  - name: secure", "    bind: 127.0.0.1:0", "    pool: p",
            tls_block([cls.a]),
            "  - name: secureproxy", "    bind: 127.0.0.1:0", "    pool: p",
            "    proxy_protocol: { trusted: [127.0.0.0/8] }", tls_block([cls.a]),
            "pools:", "  - name: p", f"    backends: [ {{ address: {cls.backend.address} }} ]",
            "admin:", "  bind: 127.0.0.1:0", "log:", "  level: info"]) + "\n"
        cls.term = Rondel(term)
        cls.silent = socket.socket()
        cls.silent.bind(("127.0.0.1", 0))
        cls.silent.listen(16)  # the kernel accepts; nobody reads
        cls.front = Rondel(cls.config())

    @classmethod
    def config(cls, ca=None):
        return front_config(cls.term.ports["secure"], cls.certs, ca or cls.other_ca,
                            proxy_port=cls.term.ports["secureproxy"],
                            silent_port=cls.silent.getsockname()[1])

    @classmethod
    def tearDownClass(cls):
        cls.front.stop()
        cls.term.stop()
        cls.backend.stop()
        cls.silent.close()

    def handshakes(self, result):
        return metric_sum(scrape(self.front.admin_port)[1], HS, result=result)

    def test_good_certificate_serves_and_reuses_connections(self):
        before = self.handshakes("ok") + self.handshakes("resumed")
        n = 10
        for i in range(n):
            status, _, body = http_get(self.front.ports["good"], "/_echo")
            self.assertEqual(status, 200, body)
            # The terminator saw a TLS connection: it says so to its backend.
            self.assertIn(b"X-Forwarded-Proto: https", body)
        made = self.handshakes("ok") + self.handshakes("resumed") - before
        self.assertGreaterEqual(made, 1)
        self.assertLess(made, n, "every request made its own backend handshake")

    def test_backend_handshakes_offer_alpn_http11(self):
        # rondel speaks HTTP/1.1 to backends and says so by ALPN: the terminator negotiates it.
        def negotiated(protocol):
            return metric_sum(scrape(self.term.admin_port)[1], "rondel_tls_handshakes_alpn_total",
                              protocol=protocol)
        before = negotiated("http/1.1"), negotiated("none")
        n = 3
        for _ in range(n):
            status, _, body = http_get(self.front.ports["fresh"], "/")
            self.assertEqual(status, 200, body)
        self.assertGreaterEqual(negotiated("http/1.1") - before[0], n)
        self.assertEqual(negotiated("none") - before[1], 0)

    def test_session_resumed_on_new_connections(self):
        term_resumed = metric_sum(scrape(self.term.admin_port)[1], "rondel_tls_resumptions_total")
        resumed = self.handshakes("resumed")
        n = 5
        for _ in range(n):
            status, _, body = http_get(self.front.ports["fresh"], "/")
            self.assertEqual(status, 200, body)
        # max_idle_per_backend 0: n connections, all but (at most) the first resumed.
        self.assertGreaterEqual(self.handshakes("resumed") - resumed, n - 1)
        self.assertGreaterEqual(
            metric_sum(scrape(self.term.admin_port)[1], "rondel_tls_resumptions_total") - term_resumed,
            n - 1)

    def check_refused(self, listener):
        failed = self.handshakes("verify")
        start = self.front.out.count()
        status, _, _ = http_get(self.front.ports[listener], "/")
        self.assertEqual(status, 502)
        self.assertEqual(self.handshakes("verify") - failed, 1)
        self.front.out.wait_for(r"backend_tls_failed .*reason=verify", start=start)

    def test_wrong_server_name_is_refused(self):
        self.check_refused("wrongname")

    def test_wrong_ca_is_refused(self):
        self.check_refused("wrongca")

    def test_verify_off_accepts_any_certificate(self):
        status, _, body = http_get(self.front.ports["noverify"], "/")
        self.assertEqual(status, 200, body)

    def test_large_and_chunked_bodies_and_uploads_arrive_whole(self):
        port = self.front.ports["good"]
        for size in (300000, 3000000):
            status, _, body = http_get(port, f"/big?size={size}")
            self.assertEqual((status, len(body)), (200, size))
        status, _, body = http_get(port, "/c?size=100000&chunked=1")
        self.assertEqual((status, len(body)), (200, 100000))
        upload = os.urandom(500000)
        status, headers, _ = http_request(port, "POST", "/up?checksum=1", body=upload)
        self.assertEqual(status, 200)
        self.assertEqual(int(headers["x-request-crc32"], 16), zlib.crc32(upload))

    def test_health_checks_run_over_tls(self):
        def checks(pool, result):
            return metric_sum(scrape(self.front.admin_port)[1], "rondel_backend_health_checks_total",
                              pool=pool, result=result)
        wait_until(lambda: checks("checked", "ok") >= 2, what="TLS health checks to pass")
        self.assertEqual(checks("checked", "failed"), 0)
        self.front.out.wait_for(r"backend_down pool=checkedbad .*reason=tls_verify")
        self.assertEqual(checks("checkedbad", "ok"), 0)

    def test_handshake_counts_in_the_connect_timeout(self):
        timeouts = self.handshakes("timeout")
        status, _, _ = http_get(self.front.ports["silent"], "/")
        self.assertEqual(status, 504)
        self.assertEqual(self.handshakes("timeout") - timeouts, 1)

    def test_proxy_header_goes_ahead_of_the_handshake(self):
        def headers():
            return metric_sum(scrape(self.term.admin_port)[1],
                              "rondel_proxy_protocol_headers_total", listener="secureproxy",
                              version="v2")
        before = headers()
        status, _, body = http_get(self.front.ports["proxied"], "/_echo")
        self.assertEqual(status, 200, body)
        self.assertIn(b"X-Forwarded-Proto: https", body)
        self.assertEqual(headers() - before, 1)

    def test_reload_with_bad_ca_file_keeps_old_config(self):
        missing = os.path.join(self.certs.dir, "missing-ca.pem")
        bad = self.config(ca=missing)
        start = self.front.out.count()
        self.assertFalse(self.front.reload(bad, expect_ok=False))
        self.front.out.wait_for(missing + r": cannot open", start=start)
        status, _, _ = http_get(self.front.ports["good"], "/")
        self.assertEqual(status, 200)
        self.front.reload(self.config())


if __name__ == "__main__":
    main()
