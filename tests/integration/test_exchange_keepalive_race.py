"""The keep-alive race (issue 13, defect 3): a backend closes an idle keep-alive connection just
as rondel sends the next request on it. A request that fails on a reused backend connection
before any response byte arrived is retried once on a fresh connection to the same backend: the
client sees no error, the backend is not counted as failed and no request spills."""
import time
import unittest

from harness import (ConnBackend, HttpConn, Rondel, main, make_config, metric_sum, read_head,
                     scrape)


class CloseAfterAnswerBackend(ConnBackend):
    """Answers one request per connection (keep-alive, without Connection: close), then closes
    the connection 100 ms later without reading what arrived meanwhile: the way a server whose
    keep-alive timeout expires drops a connection rondel already sent a request on."""

    def __init__(self, linger=0.1):
        self.linger = linger
        self.answered = 0
        super().__init__(self._serve)

    def _serve(self, c):
        if read_head(c)[0] is None:
            return
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        self.answered += 1
        time.sleep(self.linger)


class KeepAliveRace(unittest.TestCase):
    def test_reused_connection_closed_by_backend_is_retried_on_a_fresh_one(self):
        backend = CloseAfterAnswerBackend()
        rondel = Rondel(make_config([{"address": backend.address, "id": "b1"}]))
        try:
            statuses = []
            for i in range(12):
                with HttpConn(rondel.port) as c:
                    c.request("GET", "/obj%d" % i)
                    statuses.append(c.read_response()[0])
                time.sleep(0.05)  # requests 50 ms apart: each lands in a backend's 100 ms linger
            self.assertEqual(statuses, [200] * 12)
            _, samples, _ = scrape(rondel.admin_port)
            # Not a backend failure and not a retry away from it.
            for name in ("rondel_backend_errors_total", "rondel_backend_retries_total",
                         "rondel_retries_total"):
                self.assertEqual(metric_sum(samples, name), 0, name)
            self.assertEqual(metric_sum(samples, "rondel_requests_total", backend="b1",
                                        **{"class": "2xx"}), 12)
        finally:
            self.assertEqual(rondel.stop(), 0)
            backend.stop()

    def test_two_backends_no_spill(self):
        a, b = CloseAfterAnswerBackend(), CloseAfterAnswerBackend()
        rondel = Rondel(make_config([{"address": a.address, "id": "a"},
                                     {"address": b.address, "id": "b"}]))
        try:
            for i in range(12):
                with HttpConn(rondel.port) as c:
                    c.request("GET", "/same-key")
                    self.assertEqual(c.read_response()[0], 200)
                time.sleep(0.05)
            _, samples, _ = scrape(rondel.admin_port)
            self.assertEqual(metric_sum(samples, "rondel_spillover_total"), 0)
            # Every request for the one key stayed on its home backend.
            self.assertEqual(sorted([a.answered, b.answered]), [0, 12])
        finally:
            self.assertEqual(rondel.stop(), 0)
            a.stop()
            b.stop()


if __name__ == "__main__":
    main()
