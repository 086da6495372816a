"""Backend keep-alive pool: max_idle_per_backend bounds the idle connections kept per backend."""
import threading
import unittest

from harness import Backend, Rondel, http_get, main, make_config, wait_until


class IdlePool(unittest.TestCase):
    def burst(self, rondel, n):
        """n slow requests for one key, started together at a barrier."""
        start = threading.Barrier(n)

        def one():
            start.wait(timeout=10)
            http_get(rondel.port, "/same?delay=300")
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)

    def pooled_after_burst(self, max_idle):
        """(connections rondel pooled after a burst, connections it opened for the burst).
        rondel opens a backend connection only when none is idle, so k opened means k were open
        at once, and all k are idle after the burst: it must keep exactly min(k, max_idle). A
        burst whose requests overlapped less than max_idle + 1 (threads started late on a busy
        machine) does not test the bound, so another is sent (at most 5)."""
        b = Backend("pool")
        r = Rondel(make_config([b], pool={"max_idle_per_backend": max_idle, "balance_factor": 0}))
        try:
            polls = [0]

            def stats():  # each /_stats request is a connection of its own
                polls[0] += 1
                return b.stats()
            for _ in range(5):
                before = stats()["connections_total"]
                polls[0] = 0
                self.burst(r, 8)
                r.wait_idle()
                # What stays open at the backend is what rondel pooled (+1: the /_stats request).
                wait_until(lambda: stats()["connections_open"] <= max_idle + 1, timeout=5,
                           what=f"at most {max_idle} pooled connections")
                st = stats()
                opened = st["connections_total"] - before - polls[0]
                pooled = st["connections_open"] - 1
                print(f"max_idle {max_idle}: the burst opened {opened}, {pooled} pooled",
                      flush=True)
                if opened > max_idle:
                    return pooled, opened
            self.fail(f"no burst opened more than {max_idle} backend connections in 5 tries")
        finally:
            self.assertEqual(r.stop(), 0)
            b.stop()

    def test_pool_keeps_at_most_max_idle(self):
        self.assertEqual(self.pooled_after_burst(3)[0], 3)

    def test_zero_keeps_none(self):
        self.assertEqual(self.pooled_after_burst(0)[0], 0)


if __name__ == "__main__":
    main()
