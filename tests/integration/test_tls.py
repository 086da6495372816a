"""TLS termination with real clients (curl, openssl s_client): certificates chosen by SNI with
wildcards and a default, ALPN, X-Forwarded-Proto, TLS versions, session resumption (across a
reload too, and refused once the ticket key rotated out), client certificates (mTLS), `rondel -c`
on good and bad certificates, and a reload that swaps certificates or keeps the old ones on a
bad file. Certificates are made in the test (tls_certs.py)."""
import json
import os
import re
import subprocess
import time
import unittest

from harness import (RONDEL_BIN, Backend, Rondel, access_records, http_get, main, metric_sum,
                     scrape, wait_until)
from tls_certs import Certs, listeners_config, tls_block


def curl(port, host, path="/", cacert=None, args=(), timeout=20):
    """(exit code, status, body, stderr) of one curl https request to `host` resolved to us."""
    cmd = ["curl", "-sS", "--resolve", f"{host}:{port}:127.0.0.1", "-o", "-",
           "-w", "\n%{http_code}", *args]
    if cacert:
        cmd += ["--cacert", cacert]
    cmd.append(f"https://{host}:{port}{path}")
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    body, _, code = out.rpartition("\n")
    return p.returncode, int(code or 0), body, p.stderr.decode(errors="replace")


def s_client(port, servername=None, args=(), request=True, timeout=20):
    """openssl s_client's whole output for one connection (a request when `request`)."""
    cmd = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-ign_eof", *args]
    if servername:
        cmd += ["-servername", servername]
    data = b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" if request else b""
    p = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout)
    return p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def subject_cn(out):
    m = re.search(r"^subject=.*CN\s*=\s*([^\s,/]+)", out, re.M)
    return m.group(1) if m else None


class TlsBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = Certs()
        cls.a = cls.certs.leaf("a", ["a.test"])
        cls.wild = cls.certs.leaf("wild", ["*.example.test", "example.test"])
        cls.backend = Backend("b0")

    @classmethod
    def tearDownClass(cls):
        cls.backend.stop()

    def start(self, tls_keys=None, certs=None, extra_listeners=(), log_extra=""):
        block = tls_block(certs or [self.a, self.wild], **(tls_keys or {}))
        listeners = [("secure", block), *extra_listeners]
        r = Rondel(listeners_config(listeners, [self.backend], log_extra=log_extra))
        self.addCleanup(lambda: self.assertEqual(r.stop(), 0))
        return r


class TlsServing(TlsBase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.access = None

    def setUp(self):
        self.access = os.path.join(self.certs.dir, f"access-{self._testMethodName}.log")
        self.r = self.start(log_extra=f'  access_log: "{self.access}"')
        self.port = self.r.ports["secure"]

    def test_curl_sni_selects_certificate_and_forwards_https(self):
        rc, status, body, err = curl(self.port, "a.test", "/_echo", cacert=self.certs.ca)
        self.assertEqual((rc, status), (0, 200), err)
        self.assertIn("X-Forwarded-Proto: https", body)
        # The wildcard certificate serves a name under it (curl verifies the name).
        rc, status, _, err = curl(self.port, "www.example.test", "/", cacert=self.certs.ca)
        self.assertEqual((rc, status), (0, 200), err)
        # Two labels under the wildcard do not match it: the default certificate is sent.
        self.assertEqual(subject_cn(s_client(self.port, "a.b.example.test")), "a.test")
        self.assertEqual(subject_cn(s_client(self.port, "WWW.Example.Test")), "*.example.test")
        self.assertEqual(subject_cn(s_client(self.port, "unknown.test")), "a.test")
        self.assertEqual(subject_cn(s_client(self.port, None)), "a.test")

    def test_access_log_has_tls_fields(self):
        rc, status, _, err = curl(self.port, "a.test", "/logged", cacert=self.certs.ca)
        self.assertEqual((rc, status), (0, 200), err)
        recs = [r for r in access_records(self.access, min_count=1) if r["target"] == "/logged"]
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["tls_version"], "TLSv1.3")
        self.assertEqual(recs[0]["sni"], "a.test")
        self.assertEqual(recs[0]["tls_resumed"], "0")

    def test_alpn_http11_and_h2_refused(self):
        out = s_client(self.port, "a.test", ["-alpn", "h2,http/1.1"])
        self.assertIn("ALPN protocol: http/1.1", out)
        self.assertIn("HTTP/1.1 200", out)
        before = metric_sum(scrape(self.r.admin_port)[1], "rondel_tls_handshake_failures_total",
                            reason="alpn")
        out = s_client(self.port, "a.test", ["-alpn", "h2"], request=False)
        self.assertIn("no application protocol", out)
        wait_until(lambda: metric_sum(scrape(self.r.admin_port)[1],
                                      "rondel_tls_handshake_failures_total",
                                      reason="alpn") == before + 1, what="alpn failure counted")
        # Without ALPN the connection is served all the same.
        self.assertIn("HTTP/1.1 200", s_client(self.port, "a.test"))

    def test_versions_and_default_profile(self):
        out = s_client(self.port, "a.test", ["-tls1_2"])
        self.assertIn("Protocol  : TLSv1.2", out)
        self.assertIn("HTTP/1.1 200", out)
        self.assertIn("Protocol  : TLSv1.3", s_client(self.port, "a.test", ["-tls1_3"]))
        # TLS 1.1 and CBC-mode 1.2 ciphers are outside the intermediate profile.
        self.assertNotIn("HTTP/1.1 200", s_client(self.port, "a.test", ["-tls1_1"]))
        out = s_client(self.port, "a.test", ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-SHA"])
        self.assertNotIn("HTTP/1.1 200", out)
        _, samples, _ = scrape(self.r.admin_port)
        self.assertGreaterEqual(metric_sum(samples, "rondel_tls_handshakes_total",
                                           version="TLSv1.2"), 1)
        self.assertGreaterEqual(metric_sum(samples, "rondel_tls_handshake_failures_total"), 2)

    def test_resumption_counts_and_logs(self):
        sess = os.path.join(self.certs.dir, "sess-resume.pem")
        out = s_client(self.port, "a.test", ["-sess_out", sess])
        self.assertIn("New, TLSv1.3", out)
        out = s_client(self.port, "a.test", ["-sess_in", sess])
        self.assertIn("Reused, TLSv1.3", out)
        self.assertIn("HTTP/1.1 200", out)
        _, samples, _ = scrape(self.r.admin_port)
        self.assertGreaterEqual(metric_sum(samples, "rondel_tls_resumptions_total"), 1)
        recs = access_records(self.access, min_count=2)
        self.assertIn("1", [r.get("tls_resumed") for r in recs])
        # TLS 1.2 tickets too.
        out = s_client(self.port, "a.test", ["-tls1_2", "-sess_out", sess])
        self.assertIn("New, TLSv1.2", out)
        self.assertIn("Reused, TLSv1.2", s_client(self.port, "a.test", ["-tls1_2", "-sess_in", sess]))

    def test_plain_http_on_tls_port_is_refused_and_counted(self):
        status = None
        try:
            status, _, _ = http_get(self.port, "/", timeout=5)
        except Exception:  # noqa: BLE001 - the connection is closed without an HTTP answer
            pass
        self.assertIsNone(status)
        wait_until(lambda: metric_sum(scrape(self.r.admin_port)[1],
                                      "rondel_tls_handshake_failures_total",
                                      reason="http_request") >= 1, what="http_request counted")

    def test_pipelined_records_and_large_upload_over_tls(self):
        """Ciphertext the codec has not taken yet is kept by the connection and delivered in
        order: three requests in three TLS records sent in one TCP write, the first answered
        slowly (the codec stops reading after it, with two records unread in the worker's read
        buffer), are answered in turn; then a 4 MiB upload arrives whole (its CRC-32 as the
        backend computed it)."""
        import socket
        import ssl
        import zlib
        ctx = ssl.create_default_context(cafile=self.certs.ca)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname="a.test")
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=20)
        self.addCleanup(sock.close)

        def until(step):
            """Runs step() until it stops wanting to read, feeding it what the socket gives."""
            while True:
                try:
                    return step()
                except ssl.SSLWantReadError:
                    sock.sendall(outgoing.read())
                    data = sock.recv(65536)
                    self.assertTrue(data, "connection closed")
                    incoming.write(data)
        until(tls.do_handshake)
        sock.sendall(outgoing.read())
        buf = bytearray()

        def response():
            while b"\r\n\r\n" not in buf:
                buf.extend(until(lambda: tls.read(65536)))
            end = buf.index(b"\r\n\r\n") + 4
            head = bytes(buf[:end]).decode("latin-1")
            length = int(re.search(r"(?im)^content-length:\s*(\d+)", head).group(1))
            while len(buf) < end + length:
                buf.extend(until(lambda: tls.read(65536)))
            body = bytes(buf[end:end + length])
            del buf[:end + length]
            return head, body
        for i in range(3):  # one record each, all sent at once below
            tls.write(b"GET /_echo?n=%d%s HTTP/1.1\r\nHost: a.test\r\n\r\n"
                      % (i, b"&delay=100" if i == 0 else b""))
        sock.sendall(outgoing.read())
        for i in range(3):
            head, body = response()
            self.assertIn(" 200 ", head.split("\r\n")[0])
            self.assertIn(f"GET /_echo?n={i}", body.decode("latin-1"))
        upload = os.urandom(4 << 20)
        tls.write(b"POST /up?checksum=1 HTTP/1.1\r\nHost: a.test\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(upload) + upload)
        sock.sendall(outgoing.read())
        head, _ = response()
        self.assertIn(" 200 ", head.split("\r\n")[0])
        self.assertIn(f"X-Request-Crc32: {zlib.crc32(upload):08x}", head)

    def test_admin_certificates_view_and_expiry_metric(self):
        status, _, body = http_get(self.r.admin_port, "/api/certificates")
        self.assertEqual(status, 200)
        view = json.loads(body)
        [listener] = view["listeners"]
        self.assertEqual(listener["listener"], "secure")
        names = [c["names"] for c in listener["certificates"]]
        self.assertEqual(names, [["a.test"], ["*.example.test", "example.test"]])
        for c in listener["certificates"]:
            self.assertIn(c["expires_in_days"], (9, 10))
            self.assertNotIn(self.certs.dir, json.dumps(c))  # no file paths
        _, samples, _ = scrape(self.r.admin_port)
        [exp] = [v for n, labels, v in samples
                 if n == "rondel_tls_certificate_expiry_timestamp_seconds"
                 and labels == {"listener": "secure", "name": "a.test"}]
        self.assertAlmostEqual(exp, time.time() + 10 * 86400, delta=86400)


class TlsLifecycle(TlsBase):
    def test_reload_swaps_certificates_and_keeps_old_on_bad_file(self):
        r = self.start(certs=[self.a])
        port = r.ports["secure"]
        sess = os.path.join(self.certs.dir, "sess-reload.pem")
        self.assertIn("New,", s_client(port, "a.test", ["-sess_out", sess]))
        self.assertEqual(subject_cn(s_client(port, "www.example.test")), "a.test")
        good = listeners_config([("secure", tls_block([self.a, self.wild]))], [self.backend])
        r.reload(good)
        self.assertEqual(subject_cn(s_client(port, "www.example.test")), "*.example.test")
        # Ticket keys belong to the listener, not to one configuration: sessions survive.
        self.assertIn("Reused,", s_client(port, "a.test", ["-sess_in", sess]))
        # A key that does not match its certificate: refused, the old certificates serve on.
        bad = listeners_config([("secure", tls_block([(self.a[0], self.wild[1])]))],
                               [self.backend])
        start = r.out.count()
        self.assertFalse(r.reload(bad, expect_ok=False))
        failed = [l for l in r.lines()[start:] if "reload_failed" in l]
        self.assertTrue(any(self.wild[1] + ": private key does not match" in l for l in failed),
                        failed)
        self.assertEqual(subject_cn(s_client(port, "www.example.test")), "*.example.test")
        rc, status, _, err = curl(port, "www.example.test", "/", cacert=self.certs.ca)
        self.assertEqual((rc, status), (0, 200), err)

    def test_expired_certificate_refuses_start(self):
        expired = self.certs.leaf("expired", ["old.test"], expired=True)
        text = listeners_config([("secure", tls_block([expired]))], [self.backend])
        r = Rondel(text, expect_start=False)
        self.assertEqual(r.proc.wait(timeout=20), 2)
        self.assertTrue(any(expired[0] + ": certificate expired on" in l for l in r.lines()))

    def test_ticket_keys_rotate_out(self):
        r = self.start(certs=[self.a], tls_keys={"ticket_key_rotation": "1s"})
        port = r.ports["secure"]
        sess = os.path.join(self.certs.dir, "sess-rotate.pem")
        # A ticket is sealed by the current key, which is under one rotation (1 s) old then, and
        # its key opens tickets until two rotations after the key was made. So the ticket is
        # accepted for at least 1 s after sealing (sealed after t0), and refused from 2 s after
        # the first client returned (sealed, so its key made, before t1), whatever the load.
        t0 = time.monotonic()
        self.assertIn("New,", s_client(port, "a.test", ["-sess_out", sess]))
        t1 = time.monotonic()
        out = s_client(port, "a.test", ["-sess_in", sess])
        if time.monotonic() - t0 < 1.0:  # within one rotation the ticket is always accepted
            self.assertIn("Reused,", out)
        # Two rotations after its key was made, the key is gone: a full handshake. (Timed from
        # t0 before, this failed on a loaded machine when the first handshake reached rondel
        # over 0.5 s after t0.)
        time.sleep(max(0.0, t1 + 2.2 - time.monotonic()))
        self.assertIn("New,", s_client(port, "a.test", ["-sess_in", sess]))


class TlsClientCertificates(TlsBase):
    def test_required_and_optional(self):
        client = self.certs.leaf("client", ["client.test"], client=True)
        r = self.start(certs=[self.a], tls_keys={"client_ca": self.certs.ca})
        port = r.ports["secure"]
        out = s_client(port, "a.test", ["-cert", client[0], "-key", client[1]])
        self.assertIn("HTTP/1.1 200", out)
        rc, status, _, err = curl(port, "a.test", "/", cacert=self.certs.ca,
                                  args=["--cert", client[0], "--key", client[1]])
        self.assertEqual((rc, status), (0, 200), err)
        # No certificate: refused (TLS 1.3 reports it after the client's Finished).
        self.assertNotIn("HTTP/1.1 200", s_client(port, "a.test"))
        rc, status, _, _ = curl(port, "a.test", "/", cacert=self.certs.ca)
        self.assertNotEqual(rc, 0)
        # A certificate from another CA: refused too.
        self.certs._ca("other", "other CA")
        stranger = self.certs.leaf("stranger", ["s.test"], client=True, ca="other")
        self.assertNotIn("HTTP/1.1 200",
                         s_client(port, "a.test", ["-cert", stranger[0], "-key", stranger[1]]))
        wait_until(lambda: metric_sum(scrape(r.admin_port)[1],
                                      "rondel_tls_handshake_failures_total",
                                      reason="client_cert") >= 3, what="client_cert failures")
        opt = self.start(certs=[self.a],
                         tls_keys={"client_ca": self.certs.ca, "verify": "optional"})
        self.assertIn("HTTP/1.1 200", s_client(opt.ports["secure"], "a.test"))


class TlsConfigCheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = Certs()
        cls.a = cls.certs.leaf("a", ["a.test"])

    def check(self, tls_yaml):
        path = os.path.join(self.certs.dir, "check.yaml")
        with open(path, "w") as f:
            f.write("listeners:\n  - name: secure\n    bind: 127.0.0.1:0\n    pool: p\n" +
                    tls_yaml + "\npools:\n  - name: p\n    backends:\n"
                    "      - { address: 127.0.0.1:9 }\n")
        p = subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, timeout=20)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def test_good_certificate_reports_expiry(self):
        rc, out, err = self.check(tls_block([self.a]))
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"listener secure: .*a\.pem: names a\.test, expires \d{4}-\d\d-\d\d "
                              r".*\((9|10) days\)")
        self.assertTrue(out.rstrip().endswith("OK"))

    def test_bad_files_are_named_with_reason(self):
        expired = self.certs.leaf("expired", ["old.test"], expired=True)
        other = self.certs.leaf("other", ["o.test"])
        garbage = self.certs.path("garbage.pem")
        with open(garbage, "w") as f:
            f.write("not a certificate\n")
        cases = [
            ([expired], expired[0] + ": certificate expired on"),
            ([(self.a[0], other[1])], other[1] + ": private key does not match certificate"),
            ([(self.certs.path("missing.pem"), self.a[1])],
             self.certs.path("missing.pem") + ": cannot open: No such file or directory"),
            ([(garbage, self.a[1])], garbage + ": not a PEM certificate"),
        ]
        for pairs, want in cases:
            rc, out, err = self.check(tls_block(pairs))
            self.assertEqual(rc, 1, (want, out, err))
            self.assertIn(want, err)
            self.assertNotIn("OK", out)

    def test_config_errors_have_positions(self):
        rc, _, err = self.check(tls_block([self.a], alpn="[h3]"))
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"check\.yaml:\d+:\d+: 'alpn' protocols are http/1.1 and h2")
        rc, _, err = self.check(tls_block([self.a], min_version="TLSv1.3", max_version="TLSv1.2"))
        self.assertIn("'min_version' is above 'max_version'", err)
        rc, _, err = self.check(tls_block([self.a], verify="required"))
        self.assertIn("'verify' needs 'client_ca'", err)


if __name__ == "__main__":
    main()
