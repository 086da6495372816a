"""Per-backend accounting of failed attempts (issue 13, defect 11): a 503 that rondel answers
after every backend failed is rondel's own answer, not one of the backend's responses, so it
is not counted a second time on the last backend tried (which has its connect error already)."""
import socket
import unittest

from harness import Rondel, http_get, main, make_config, metric_sum, scrape


class FailedAttemptsCountedOnce(unittest.TestCase):
    def test_503_after_exhausted_retries_is_not_a_backend_response(self):
        dead = socket.socket()  # bound, never listening: connects are refused
        dead.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % dead.getsockname()[1]
        rondel = Rondel(make_config([{"address": addr, "id": "dead"}],
                                    pool={"retries": 1,
                                          "passive_health": "{ consecutive_failures: 0 }"}))
        try:
            for _ in range(3):
                self.assertIn(http_get(rondel.port, "/x")[0], (502, 503))
            _, samples, _ = scrape(rondel.admin_port)
            self.assertEqual(metric_sum(samples, "rondel_backend_connect_errors_total",
                                        backend="dead"), 3)
            # The backend answered nothing: no exchange of it to count, by any status class.
            self.assertEqual(metric_sum(samples, "rondel_requests_total", backend="dead"), 0)
        finally:
            self.assertEqual(rondel.stop(), 0)
            dead.close()


if __name__ == "__main__":
    main()
