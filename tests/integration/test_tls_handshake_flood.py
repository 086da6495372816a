"""A flood of slow, half-open TLS handshakes: each connection sends the first bytes of a
ClientHello and stalls. The worker keeps at most `max_handshakes` of them (the rest are closed at
accept and counted as `limit`), closes those after `handshake_timeout` (counted as `timeout`),
and meanwhile serves plain requests on another listener; once the flood is gone a TLS request
completes again."""
import socket
import unittest

from harness import Backend, Rondel, http_get, main, metric_sum, scrape, wait_until
from tls_certs import Certs, listeners_config, tls_block
from test_tls import curl

FLOOD = 60
LIMIT = 20


def failures(r, reason):
    return metric_sum(scrape(r.admin_port)[1], "rondel_tls_handshake_failures_total",
                      reason=reason)


def in_progress(r):
    return metric_sum(scrape(r.admin_port)[1], "rondel_tls_handshakes_in_progress")


def admitted_and_refused(r):
    """(handshakes in progress + timed out, refused at the limit), from one scrape."""
    samples = scrape(r.admin_port)[1]
    fail = lambda reason: metric_sum(samples, "rondel_tls_handshake_failures_total",  # noqa: E731
                                     reason=reason)
    return (metric_sum(samples, "rondel_tls_handshakes_in_progress") + fail("timeout"),
            fail("limit"))


class HandshakeFlood(unittest.TestCase):
    def test_slow_handshakes_are_bounded_and_time_out(self):
        certs = Certs()
        a = certs.leaf("a", ["a.test"])
        backend = Backend("b0")
        self.addCleanup(backend.stop)
        block = tls_block([a], max_handshakes=LIMIT, handshake_timeout="2s")
        r = Rondel(listeners_config([("secure", block), ("plain", "")], [backend]))
        self.addCleanup(lambda: self.assertEqual(r.stop(), 0))
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(FLOOD):
            s = socket.create_connection(("127.0.0.1", r.ports["secure"]), timeout=10)
            # A handshake record header announcing 512 bytes, and only 3 of them.
            s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01")
            socks.append(s)
        # Values that persist once reached: in_progress == LIMIT alone holds only until the
        # first handshake times out (2 s after its accept), which a late first poll can miss.
        # 40 refused at accept means the other 20 were admitted, held or timed out.
        wait_until(lambda: admitted_and_refused(r) == (LIMIT, FLOOD - LIMIT),
                   what="the excess closed at accept, the limit held")
        # The worker is not starved: plain requests are served during the flood.
        for i in range(20):
            status, _, _ = http_get(r.ports["plain"], f"/during/{i}")
            self.assertEqual(status, 200)
        wait_until(lambda: failures(r, "timeout") == LIMIT and in_progress(r) == 0,
                   timeout=20, what="the stalled handshakes to time out")
        # Every flood connection was closed by rondel (EOF or reset, never data).
        for s in socks:
            s.settimeout(10)
            try:
                self.assertEqual(s.recv(100), b"")
            except ConnectionResetError:
                pass
        rc, status, _, err = curl(r.ports["secure"], "a.test", "/after", cacert=certs.ca)
        self.assertEqual((rc, status), (0, 200), err)


if __name__ == "__main__":
    main()
