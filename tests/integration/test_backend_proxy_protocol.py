"""PROXY protocol v2 sent to the backends of a pool (`send_proxy_protocol: v2`): a Python
backend parses the header at the start of each connection and answers with what it carried.
It sees curl's address and the listener's address; behind a listener that accepts PROXY headers
from a trusted network, the address the client announced; and a connection, bound to one client
by its header, is reused for that client only."""
import socket
import struct
import subprocess

from harness import ConnBackend, RondelTestCase, main, raw_exchange

SIG = b"\r\n\r\n\x00\r\nQUIT\n"


class ProxiedBackend(ConnBackend):
    """Reads a v2 header, then answers each request with 'src=IP:PORT dst=IP:PORT'."""

    def __init__(self):
        self.headers = []
        super().__init__(self._serve)

    def _read(self, c, buf, n):
        while len(buf) < n:
            d = c.recv(65536)
            if not d:
                raise OSError("closed")
            buf += d
        return buf

    def _serve(self, c):
        buf = self._read(c, b"", 16)
        assert buf[:12] == SIG, buf[:16]
        fam, length = buf[13], struct.unpack("!H", buf[14:16])[0]
        buf = self._read(c, buf, 16 + length)
        payload, buf = buf[16:16 + length], buf[16 + length:]
        af, alen = (socket.AF_INET, 4) if fam == 0x11 else (socket.AF_INET6, 16)
        src = socket.inet_ntop(af, payload[:alen])
        dst = socket.inet_ntop(af, payload[alen:2 * alen])
        sport, dport = struct.unpack("!HH", payload[2 * alen:2 * alen + 4])
        text = f"src={src}:{sport} dst={dst}:{dport}"
        self.headers.append(text)
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            _, _, buf = buf.partition(b"\r\n\r\n")
            body = text.encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def config(backend):
    return f"""workers: 1
listeners:
  - name: web
    bind: 127.0.0.1:0
    pool: p
  - name: edge
    bind: 127.0.0.1:0
    pool: p
    proxy_protocol: {{ trusted: [127.0.0.0/8] }}
  - name: h2c
    bind: 127.0.0.1:0
    pool: p
    http2: prior_knowledge
pools:
  - name: p
    send_proxy_protocol: v2
    backends: [ {{ address: {backend.address} }} ]
log:
  level: info
"""


def via_proxy(port, client_ip, requests=1):
    """Bodies of `requests` keep-alive requests on one connection announcing `client_ip`."""
    head = f"PROXY TCP4 {client_ip} 127.0.0.1 40000 {port}\r\n".encode()
    req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n" * (requests - 1)
    req += b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    data = raw_exchange(port, head + req)
    return [part.split(b"\r\n\r\n", 1)[1][:60].decode() for part in data.split(b"HTTP/1.1 ")[1:]]


class SendProxyProtocol(RondelTestCase):
    exit_status = None  # not checked here

    @classmethod
    def start_backends(cls):
        cls.backend = ProxiedBackend()
        return [cls.backend]

    @classmethod
    def config(cls):
        return config(cls.backend)  # the module's config(), which the other tests use too

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.r = cls.rondel

    def test_backend_sees_curl_and_listener_addresses(self):
        port = self.r.ports["web"]
        out = subprocess.run(["curl", "-sS", f"http://127.0.0.1:{port}/"], capture_output=True,
                             timeout=10)
        self.assertEqual(out.stdout.decode(), f"src=127.0.0.1:0 dst=127.0.0.1:{port}")

    def test_http2_streams_send_the_listener_address_too(self):
        port = self.r.ports["h2c"]
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge",
                              f"http://127.0.0.1:{port}/"], capture_output=True, timeout=10)
        self.assertEqual(out.stdout.decode(), f"src=127.0.0.1:0 dst=127.0.0.1:{port}")

    def test_backend_sees_the_address_a_trusted_proxy_announced(self):
        port = self.r.ports["edge"]
        out = subprocess.run(["curl", "-sS", "--haproxy-protocol", f"http://127.0.0.1:{port}/"],
                             capture_output=True, timeout=10)
        self.assertTrue(out.stdout.decode().startswith("src=127.0.0.1:0 "), out)
        bodies = via_proxy(port, "203.0.113.9")
        self.assertEqual(len(bodies), 1)
        self.assertTrue(bodies[0].startswith("src=203.0.113.9:0 "), bodies)

    def test_connections_are_reused_for_the_same_client_only(self):
        port = self.r.ports["edge"]
        before = self.backend.connections
        # Three requests from one client: one backend connection (kept alive in between).
        self.assertEqual(via_proxy(port, "198.51.100.1", 3),
                         [f"src=198.51.100.1:0 dst=127.0.0.1:{port}"] * 3)
        self.assertEqual(self.backend.connections - before, 1)
        # Another client does not get that idle connection; the first client does.
        self.assertEqual(via_proxy(port, "198.51.100.2"),
                         [f"src=198.51.100.2:0 dst=127.0.0.1:{port}"])
        self.assertEqual(self.backend.connections - before, 2)
        self.assertEqual(via_proxy(port, "198.51.100.1"),
                         [f"src=198.51.100.1:0 dst=127.0.0.1:{port}"])
        self.assertEqual(self.backend.connections - before, 2)


if __name__ == "__main__":
    main()
