"""Health: active checks, passive ejection and slow start (configuration and lifecycle issue).

- A backend whose check starts failing (/_health?fail=1 turns its /healthz into 503) is down
  after `fall` checks and back after `rise`; only its keys move, and they come back.
- N consecutive 5xx eject a backend for the cool-down, then it is on probation; never more than
  max_ejected_percent of the pool is ejected.
- Slow start: a backend added by a reload gets a small share of in-flight capacity at first and
  its full share once the ramp is over; its keys (placement) do not wait.
"""
import math
import threading
import time
import unittest

from harness import Backend, Rondel, RondelTestCase, http_get, make_config, main, wait_until

HEALTH = "{ enabled: true, interval: 200ms, timeout: 500ms, rise: 2, fall: 3 }"


def states(rondel):
    return {b["id"]: b["state"] for b in rondel.pools()["pools"][0]["backends"]}


def chosen(rondel, keys):
    return {k: rondel.route("p", k)["chosen"] for k in keys}


class ActiveChecks(RondelTestCase):
    backend_names = [f"b{i}" for i in range(4)]

    @classmethod
    def config(cls):
        return make_config(cls.backends, pool={"health_check": HEALTH})

    def test_failing_check_marks_down_after_fall_and_up_after_rise_only_its_keys_move(self):
        victim = self.backends[1]
        keys = [f"/h/{i}" for i in range(400)]
        wait_until(lambda: set(states(self.rondel).values()) == {"up"}, timeout=5,
                   what="all backends up")
        before = chosen(self.rondel, keys)
        own = [k for k in keys if before[k] == victim.address]
        self.assertGreater(len(own), 40)

        start = self.rondel.out.count()
        t0 = time.monotonic()
        http_get(victim.port, "/_health?fail=1")
        wait_until(lambda: states(self.rondel)[victim.address] == "down", timeout=5,
                   interval=0.05, what="victim down")
        took_down = time.monotonic() - t0
        self.rondel.out.wait_for(rf"warn backend_down pool=p backend={victim.address} checks=3 "
                                 r"reason=status_503", timeout=5, start=start)
        # fall = 3 checks 200 ms apart: at least two intervals after the first failing check
        # (each check is armed `interval` after the last result, so this side has no noise).
        # No upper bound on the client's clock: checks=3 above proves `fall`, and the wait's
        # 5 s bounds how long it took.
        self.assertGreater(took_down, 0.35)

        during = chosen(self.rondel, keys)
        for k in keys:
            if k in own:
                self.assertNotEqual(during[k], victim.address)
            else:
                self.assertEqual(during[k], before[k], k)  # no other key moves
        for k in own[:20]:
            status, headers, _ = http_get(self.rondel.port, k)
            self.assertEqual(status, 200)
            self.assertNotEqual(headers["x-backend"], victim.name)

        start = self.rondel.out.count()
        http_get(victim.port, "/_health?fail=0")
        wait_until(lambda: states(self.rondel)[victim.address] == "up", timeout=5,
                   interval=0.05, what="victim up")
        self.rondel.out.wait_for(rf"info backend_up pool=p backend={victim.address} checks=2",
                                 timeout=2, start=start)
        self.assertEqual(chosen(self.rondel, keys), before)  # its keys come back
        for k in own[:5]:
            self.assertEqual(http_get(self.rondel.port, k)[1]["x-backend"], victim.name)
        self.rondel.wait_idle()


class PassiveEjection(unittest.TestCase):
    def setUp(self):
        self.good = [Backend(f"g{i}") for i in range(2)]
        self.bad = [Backend(f"x{i}", "--fail-mode", "status-500") for i in range(2)]
        self.all = self.good + self.bad

    def tearDown(self):
        self.rondel.stop()
        for b in self.all:
            b.stop()

    def keys_of(self, backend, n=10):
        out = []
        for i in range(2000):
            k = f"/e/{i}"
            if self.rondel.route("p", k)["owner"] == backend.address:
                out.append(k)
                if len(out) == n:
                    break
        return out

    def test_consecutive_5xx_eject_then_probation_then_eject_again(self):
        self.rondel = Rondel(make_config(self.all, pool={
            "passive_health": "{ consecutive_failures: 3, ejection_time: 1s, max_ejected_percent: 50 }"}))
        victim = self.bad[0]
        keys = self.keys_of(victim)
        for k in keys[:3]:
            self.assertEqual(http_get(self.rondel.port, k)[0], 500)
        wait_until(lambda: states(self.rondel)[victim.address] == "ejected", timeout=2,
                   what="ejection after 3 5xx")
        self.rondel.out.wait_for(rf"warn backend_ejected pool=p backend={victim.address}",
                                 timeout=2)
        for k in keys:  # its keys go to their next backend meanwhile (which may be x1: 500)
            status, headers, _ = http_get(self.rondel.port, k)
            self.assertNotEqual(headers["x-backend"], victim.name)
            self.assertEqual(status, 500 if headers["x-backend"] == "x1" else 200)
        # After the cool-down it is used again, on probation: one more 5xx ejects it again.
        start = self.rondel.out.count()
        wait_until(lambda: states(self.rondel)[victim.address] == "up", timeout=3,
                   what="restored after the cool-down")
        self.rondel.out.wait_for(rf"backend_restored pool=p backend={victim.address}", timeout=2,
                                 start=start)
        self.assertEqual(http_get(self.rondel.port, keys[1])[0], 500)
        wait_until(lambda: states(self.rondel)[victim.address] == "ejected", timeout=2,
                   what="re-ejection after one failure on probation")

    def test_never_more_than_max_ejected_percent(self):
        self.rondel = Rondel(make_config(self.all, pool={
            "passive_health": "{ consecutive_failures: 2, ejection_time: 30s, max_ejected_percent: 25 }"}))
        for bad in self.bad:
            for k in self.keys_of(bad, 4):
                http_get(self.rondel.port, k)
        time.sleep(0.5)  # two ticks
        for bad in self.bad:
            for k in self.keys_of(bad, 4):
                http_get(self.rondel.port, k)
        time.sleep(0.5)
        ejected = [i for i, s in states(self.rondel).items() if s == "ejected"]
        self.assertEqual(len(ejected), 1, states(self.rondel))  # 25% of 4


class SlowStart(unittest.TestCase):
    def test_added_backend_ramps_capacity_not_placement(self):
        a = Backend("a")
        b = Backend("b")
        try:
            pool = {"slow_start": "6s", "balance_factor": 125, "capacity_slack": 0}
            rondel = Rondel(make_config([a], pool=pool))
            t_reload = time.monotonic()  # the ramp starts after this...
            rondel.reload(make_config([a, b], pool=pool))
            t_added = time.monotonic()  # ...and before this
            # Keys whose owner is the new backend (placement does not wait for the ramp).
            keys = []
            for i in range(3000):
                k = f"/s/{i}?delay=700"
                if rondel.route("p", k)["owner"] == b.address:
                    keys.append(k)
                    if len(keys) == 20:
                        break
            self.assertEqual(len(keys), 20)

            def burst():
                served = []
                lock = threading.Lock()

                def one(k):
                    _, headers, _ = http_get(rondel.port, k, timeout=10)
                    with lock:
                        served.append(headers["x-backend"])

                ts = [threading.Thread(target=one, args=(k,)) for k in keys]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(timeout=10)
                return served.count("b"), len(served)

            ramping, n1 = burst()
            # Every pick came at least 700 ms (the backend's delay) before the burst ended, so
            # at most `ramp_s` into the ramp: b's weight was at most w = max(10%, ramp_s / 6 s)
            # of its full weight, its cap ceil(1.25 * 20 * w / (1 + w)) (3 at 1 s, 13 at full
            # weight). The bound follows the ramp's progress, however slow the machine.
            ramp_s = time.monotonic() - 0.7 - t_reload
            self.assertLess(ramp_s, 6.0, "too slow to see the ramp: it was over")
            w = max(0.1, ramp_s / 6.0)
            cap = math.ceil(1.25 * 20 * w / (1 + w) - 1e-9)
            print(f"\nslow start: picked within {ramp_s:.2f}s of the ramp's start: cap {cap}")
            self.assertEqual(n1, 20)
            self.assertLessEqual(ramping, cap)
            # The ramp is over 6 s after it started, and it started before t_added; + one tick.
            time.sleep(max(0, t_added + 6.5 - time.monotonic()))
            rondel.wait_idle()
            full, n2 = burst()
            self.assertEqual(n2, 20)
            # Full weight: cap = ceil(1.25 * 20 / 2) = 13.
            self.assertGreaterEqual(full, 9)
            print(f"\nslow start: new backend took {ramping}/20 while ramping, {full}/20 after")
            self.assertEqual(rondel.stop(), 0)
        finally:
            a.stop()
            b.stop()


if __name__ == "__main__":
    main()
