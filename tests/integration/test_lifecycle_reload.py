"""Reload under load (configuration and lifecycle issue).

A client sends requests at a steady rate for 20 s while SIGHUP arrives every second, alternating
two valid files (one adds a backend), with one broken file in the middle: no request fails, the
broken reload changes nothing, in-flight counts return to 0, and the logged moved share matches
the share of sampled keys whose /api/route owner changed. Also: a reload that changes nothing
moves no key and resets no counter; listeners are added and removed without dropping client
connections on the one that stays.
"""
import http.client
import math
import random
import re
import threading
import time

from harness import RondelTestCase, http_get, make_config, main, wait_until

SOAK_SECONDS = 20
SAMPLE_KEYS = 800


class Client:
    """Threads sending GETs at a steady rate; counts requests and failures."""

    def __init__(self, port, threads=3, rate_per_thread=50):
        self.port = port
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failures = []
        self.interval = 1.0 / rate_per_thread
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=15)

    def _run(self, i):
        rng = random.Random(i)
        keep_alive = i != 0  # thread 0 opens a new connection per request
        conn = None
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            key = f"/obj/{rng.randrange(100000)}"
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                conn.request("GET", key)
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or not body:
                    raise AssertionError(f"status {r.status}")
                with self.lock:
                    self.ok += 1
            except Exception as e:  # noqa: BLE001 - every failure is recorded
                with self.lock:
                    self.failures.append(f"{key}: {e!r}")
                if conn is not None:
                    conn.close()
                conn = None
            if not keep_alive and conn is not None:
                conn.close()
                conn = None
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()
        if conn is not None:
            conn.close()


def owners(rondel, keys):
    return {k: rondel.route("p", k)["owner"] for k in keys}


def logged_share(rondel, start):
    lines = [l for l in rondel.lines()[start:] if "reload_moved pool=p " in l]
    assert lines, "no reload_moved line"
    return float(re.search(r"share=([0-9.]+)", lines[-1]).group(1))


class ReloadUnderLoad(RondelTestCase):
    backend_names = [f"b{i}" for i in range(4)]

    @classmethod
    def config(cls):
        cls.text_a = make_config(cls.backends[:3])
        cls.text_b = make_config(cls.backends)
        return cls.text_a

    def setUp(self):
        self.rondel.reload(self.text_a)

    def added_share(self):
        """The 4th backend's exact ring key_share, or None when it is not in the pool."""
        added = self.backends[3].address
        return next((b["key_share"] for b in self.rondel.pools()["pools"][0]["backends"]
                     if b["id"] == added), None)

    def sample_reload(self, text, keys):
        """Reloads `text`; returns (logged share, measured share, true share, before, after
        owners). On a ring the keys that move when one backend is added or removed are exactly
        its arcs, so the true moved share is its key_share in whichever pool holds it. The ids
        are addresses with port-0 ports, so that share is a new random draw every run."""
        before = owners(self.rondel, keys)
        truth = self.added_share()
        start = self.rondel.out.count()
        self.rondel.reload(text)
        after = owners(self.rondel, keys)
        if truth is None:
            truth = self.added_share()
        moved = sum(1 for k in keys if before[k] != after[k]) / len(keys)
        return logged_share(self.rondel, start), moved, truth, before, after

    def test_soak_reload_every_second(self):
        keys = [f"/sample/{i}" for i in range(SAMPLE_KEYS)]
        client = Client(self.rondel.port)
        client.start()
        shares = []
        broken_checked = False
        try:
            t0 = time.monotonic()
            for i in range(SOAK_SECONDS):
                if i == SOAK_SECONDS // 2:
                    # A broken file in the middle: serving continues unchanged.
                    gen = self.rondel.pools()["generation"]
                    before = owners(self.rondel, keys[:100])
                    start = self.rondel.out.count()
                    self.rondel.reload("pools: [\n", expect_ok=False)
                    self.assertTrue(self.rondel.lines(r"error reload_error .*rondel\.yaml:\d+:\d+: "))
                    self.assertEqual(self.rondel.pools()["generation"], gen)
                    self.assertEqual(owners(self.rondel, keys[:100]), before)
                    self.assertFalse([l for l in self.rondel.lines()[start:] if "reload_moved" in l])
                    broken_checked = True
                else:
                    text = self.text_b if i % 2 == 0 else self.text_a
                    if i in (2, 3):  # one add and one remove, with sampled owners
                        logged, measured, truth, before, after = self.sample_reload(text, keys)
                        shares.append((logged, measured, truth))
                        added = self.backends[3].address
                        for k in keys:
                            if before[k] != after[k]:
                                # Only keys of the changed backend move.
                                self.assertIn(added, (before[k], after[k]))
                    else:
                        self.rondel.reload(text)
                wait = t0 + i + 1 - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
        finally:
            client.stop()
        self.assertTrue(broken_checked)
        total = client.ok + len(client.failures)
        print(f"\nsoak: {total} requests, {len(client.failures)} failed, "
              f"moved shares logged/measured/ring: {shares}")
        self.assertEqual(client.failures, [])
        self.assertGreater(client.ok, SOAK_SECONDS * 50)
        self.rondel.wait_idle()
        for logged, measured, truth in shares:
            self.assertAlmostEqual(logged, 0.25, delta=0.1)  # sanity: about 1/4 moves
            # rondel estimates the share from 65536 sampled hashes: sd = sqrt(p(1-p)/65536)
            # <= 0.00196, so 0.01 is >= 5.1 sd and a false failure has P < 3.1e-7.
            self.assertAlmostEqual(logged, truth, delta=0.01)
            # The keys sampled here are a binomial draw from the same arcs: 5 sd, P = 5.7e-7.
            self.assertAlmostEqual(measured, truth,
                                   delta=5 * math.sqrt(truth * (1 - truth) / len(keys)))
        # The daemon stays consistent: every backend that is configured is still reachable.
        self.assertEqual(http_get(self.rondel.port, "/after-soak")[0], 200)

    def test_reload_without_change_moves_nothing_and_keeps_counters(self):
        for i in range(40):
            http_get(self.rondel.port, f"/same/{i}")
        before = {b["id"]: b["requests"] for b in self.rondel.pools()["pools"][0]["backends"]}
        self.assertEqual(sum(before.values()) >= 40, True)
        start = self.rondel.out.count()
        self.rondel.reload(self.text_a)
        self.assertEqual(logged_share(self.rondel, start), 0.0)
        after = {b["id"]: b["requests"] for b in self.rondel.pools()["pools"][0]["backends"]}
        self.assertEqual(after, before)

    def test_listeners_added_and_removed_keep_connections_of_the_others(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.rondel.port, timeout=10)
        try:
            conn.request("GET", "/keep/1")
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
            extra = ("  - name: api\n    bind: 127.0.0.1:0\n    pool: p\n")
            text = self.text_a.replace("listeners:\n", "listeners:\n" + extra, 1)
            self.rondel.reload(text)
            api_port = self.rondel.ports["api"]
            self.assertEqual(http_get(api_port, "/via-api")[0], 200)
            conn.request("GET", "/keep/2")
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
            self.rondel.reload(self.text_a)
            wait_until(lambda: self.rondel.lines(r"listener_closed name=api"), timeout=5,
                       what="api listener closed")
            with self.assertRaises(OSError):
                http_get(api_port, "/gone", timeout=2)
            conn.request("GET", "/keep/3")  # the same connection on the listener that stayed
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        finally:
            conn.close()


if __name__ == "__main__":
    main()
