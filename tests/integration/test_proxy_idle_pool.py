"""Backend keep-alive pool: max_idle_per_backend bounds the idle connections kept per backend."""
import threading
import unittest

from harness import Backend, Rondel, http_get, main, make_config, wait_until


class IdlePool(unittest.TestCase):
    def burst(self, rondel, n):
        """n concurrent slow requests for one key: n backend connections open at once."""
        threads = [threading.Thread(target=http_get, args=(rondel.port, "/same?delay=300"))
                   for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)

    def pooled_after_burst(self, max_idle):
        b = Backend("pool")
        r = Rondel(make_config([b], pool={"max_idle_per_backend": max_idle, "balance_factor": 0}))
        try:
            self.burst(r, 8)
            r.wait_idle()
            # What stays open at the backend is what rondel pooled (+1: the /_stats request).
            wait_until(lambda: b.stats()["connections_open"] <= max_idle + 1, timeout=5,
                       what=f"at most {max_idle} pooled connections")
            return b.stats()["connections_open"] - 1
        finally:
            self.assertEqual(r.stop(), 0)
            b.stop()

    def test_pool_keeps_at_most_max_idle(self):
        self.assertEqual(self.pooled_after_burst(3), 3)

    def test_zero_keeps_none(self):
        self.assertEqual(self.pooled_after_burst(0), 0)


if __name__ == "__main__":
    main()
