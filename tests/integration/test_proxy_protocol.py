"""PROXY protocol on a listener (`proxy_protocol: { trusted: [...] }`), with real clients.

- curl --haproxy-protocol (v1) is served; the header's address is the backend's X-Forwarded-For
  and the access log's client;
- v1 and v2 headers by raw socket carry other addresses (IPv4 and IPv6) that replace the peer's
  in X-Forwarded-For and the access log; a v2 LOCAL header keeps the real address;
- `hash_key: src` hashes the carried address: two carried addresses that /api/route sends to
  different backends land on those backends;
- a header split over several TCP writes still works;
- a connection from outside `trusted`, a missing (plain HTTP) or malformed header, and a silent
  connection (past header_timeout) are closed without a response, and each close is counted in
  rondel_proxy_protocol_rejects_total by reason.
"""
import os
import select
import socket
import struct
import subprocess
import time

from harness import (RondelTestCase, access_records, main, make_config, metric_sum,
                     parse_responses, scrape, wait_until)

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
HEADER_TIMEOUT_S = 1.0
REQUEST = b"GET /_echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"


def v1(src, dst="192.0.2.80", sport=40000, dport=80):
    proto = "TCP6" if ":" in src else "TCP4"
    return f"PROXY {proto} {src} {dst} {sport} {dport}\r\n".encode()


def v2(src=None, dst=None, sport=40000, dport=80, local=False, tlvs=b""):
    if local:
        return V2_SIG + bytes([0x20, 0x00]) + struct.pack("!H", len(tlvs)) + tlvs
    af = socket.AF_INET6 if ":" in src else socket.AF_INET
    payload = (socket.inet_pton(af, src) + socket.inet_pton(af, dst) +
               struct.pack("!HH", sport, dport) + tlvs)
    fam = 0x21 if af == socket.AF_INET6 else 0x11
    return V2_SIG + bytes([0x21, fam]) + struct.pack("!H", len(payload)) + payload


def exchange(port, pieces, timeout=10.0):
    """Sends each piece as its own write (TCP_NODELAY; after every piece but the last, checks
    that rondel has answered nothing yet and kept the connection), then reads until rondel
    closes. Returns the bytes received."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, p in enumerate(pieces):
            s.sendall(p)
            if i + 1 < len(pieces):
                # Nothing comes back for a partial header (the wait bounds the check; it also
                # leaves rondel the time to read this piece on its own).
                readable, _, _ = select.select([s], [], [], 0.2)
                assert not readable, "rondel answered or closed a partial PROXY header"
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks)
    finally:
        s.close()


def xff(echo_body):
    """X-Forwarded-For of the request head a backend's /_echo returned."""
    for line in echo_body.split(b"\r\n"):
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"x-forwarded-for":
            return v.strip().decode()
    return None


class ProxyProtocol(RondelTestCase):
    backend_names = [f"b{i}" for i in range(3)]
    use_dir = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.port = cls.rondel.ports["web"]
        cls.by_address = {b.address: b.name for b in cls.backends}

    @classmethod
    def config(cls):
        cls.access_log = os.path.join(cls.dir, "access.log")
        text = make_config(
            cls.backends, log={"access_log": cls.access_log},
            listener={"proxy_protocol": "{ trusted: [127.0.0.0/8, '::1/128'] }",
                      "header_timeout": f"{int(HEADER_TIMEOUT_S * 1000)}ms"},
            pool={"hash_key": "src"})
        # A listener that trusts nobody on loopback.
        text = text.replace("pools:\n", "  - { name: far, bind: 127.0.0.1:0, pool: p, "
                            "proxy_protocol: { trusted: [10.0.0.0/8] } }\npools:\n", 1)
        return text

    def rejects(self, reason, listener="web"):
        _, samples, _ = scrape(self.rondel.admin_port)
        return metric_sum(samples, "rondel_proxy_protocol_rejects_total", listener=listener,
                          reason=reason)

    def headers(self, version):
        _, samples, _ = scrape(self.rondel.admin_port)
        return metric_sum(samples, "rondel_proxy_protocol_headers_total", listener="web",
                          version=version)

    def served(self, pieces):
        resp = parse_responses(exchange(self.port, pieces))
        self.assertEqual(len(resp), 1, resp)
        status, headers, body = resp[0]
        self.assertEqual(status, 200)
        return headers, body

    def access_client(self, marker):
        """The access log's client of the one request whose target is /_echo?m=marker."""
        target = f"/_echo?m={marker}"
        recs = []
        wait_until(lambda: recs.extend(r for r in access_records(self.access_log)
                                       if r.get("target") == target) or recs,
                   timeout=5, what=f"the access-log line of {target}")
        return recs[0]["client"]

    def test_curl_haproxy_protocol_v1(self):
        before = self.headers("v1")
        out = subprocess.run(
            ["curl", "-sS", "--max-time", "10", "--haproxy-protocol", "-D", "-",
             f"http://127.0.0.1:{self.port}/_echo?m=curl"],
            capture_output=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith(b"HTTP/1.1 200"), out.stdout[:200])
        # curl's header carries its own address: the backend sees that, not the PROXY line.
        self.assertIn(b"X-Forwarded-For: 127.0.0.1\r\n", out.stdout)
        self.assertNotIn(b"PROXY TCP4", out.stdout)
        self.assertEqual(self.access_client("curl"), "127.0.0.1")
        self.assertEqual(self.headers("v1"), before + 1)

    def test_carried_addresses_replace_the_peer(self):
        cases = [
            ("v1-4", v1("203.0.113.9"), "203.0.113.9"),
            ("v1-6", v1("2001:db8::5", "2001:db8::1"), "2001:db8::5"),
            ("v2-4", v2("198.51.100.23", "192.0.2.1", tlvs=b"\x01\x00\x02h2"), "198.51.100.23"),
            ("v2-6", v2("2001:db8:1::77", "2001:db8::1"), "2001:db8:1::77"),
            ("v2-local", v2(local=True), "127.0.0.1"),  # LOCAL: the real address
        ]
        for marker, header, want in cases:
            with self.subTest(marker):
                req = REQUEST.replace(b"/_echo", f"/_echo?m={marker}".encode())
                _, body = self.served([header + req])
                self.assertEqual(xff(body), want)
                self.assertEqual(self.access_client(marker), want)

    def test_split_header_over_several_writes(self):
        for marker, header in (("split-v1", v1("203.0.113.44")),
                               ("split-v2", v2("203.0.113.44", "192.0.2.1"))):
            with self.subTest(marker):
                req = REQUEST.replace(b"/_echo", f"/_echo?m={marker}".encode())
                pieces = [header[:3], header[3:14], header[14:-1], header[-1:] + req]
                _, body = self.served(pieces)
                self.assertEqual(xff(body), "203.0.113.44")

    def test_src_hash_uses_the_carried_address(self):
        # Two carried addresses that /api/route sends to different backends.
        owners = {}
        for i in range(1, 200):
            ip = f"198.18.{i}.{i}"
            owners.setdefault(self.rondel.route("p", ip)["owner"], ip)
            if len(owners) >= 2:
                break
        self.assertGreaterEqual(len(owners), 2)
        for owner, ip in owners.items():
            for _ in range(3):
                headers, _ = self.served([v1(ip) + REQUEST])
                self.assertEqual(headers["x-backend"], self.by_address[owner], ip)

    def test_untrusted_source_is_closed_at_accept(self):
        before = self.rejects("untrusted", listener="far")
        data = exchange(self.rondel.ports["far"], [v1("203.0.113.9") + REQUEST])
        self.assertEqual(data, b"")
        self.assertEqual(self.rejects("untrusted", listener="far"), before + 1)

    def test_missing_and_malformed_headers_are_closed_and_counted(self):
        cases = [("missing", REQUEST),
                 ("malformed", b"PROXY TCP4 203.0.113.9 nonsense 1 2\r\n" + REQUEST),
                 ("malformed", V2_SIG + b"\x21\x11\x00\x04abcd" + REQUEST),
                 ("unsupported", V2_SIG + b"\x21\x12\x00\x0c" + b"x" * 12 + REQUEST),
                 ("too_long", b"PROXY UNKNOWN " + b"x" * 200 + b"\r\n" + REQUEST)]
        for reason, data in cases:
            with self.subTest(reason):
                before = self.rejects(reason)
                self.assertEqual(exchange(self.port, [data]), b"")
                self.assertEqual(self.rejects(reason), before + 1)

    def test_header_stage_timeout_closes_a_silent_connection(self):
        for pieces in ([], [b"PROXY TCP4 203.0"]):
            with self.subTest(sent=pieces):
                before = self.rejects("timeout")
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                try:
                    start = time.monotonic()
                    for p in pieces:
                        s.sendall(p)
                    self.assertEqual(s.recv(1024), b"")  # rondel closes (or recv times out)
                    elapsed = time.monotonic() - start
                finally:
                    s.close()
                # Not closed before the timeout (no upper bound: the machine may be slow).
                self.assertGreaterEqual(elapsed, HEADER_TIMEOUT_S * 0.9)
                wait_until(lambda: self.rejects("timeout") == before + 1, timeout=5,
                           what="the timeout reject counted")


if __name__ == "__main__":
    main()
