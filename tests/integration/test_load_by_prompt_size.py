"""`load_by: prompt_size` through the daemon (issue 35, part 4).

Two backends that hold every response 800 ms, `capacity_slack: 0`, keys from X-Key. A 200 KiB
POST for key k is in flight at k's home; then a small GET for k:
- `load_by: requests` (the default): the home holds 1 of 1 request (cap 2 for 2), so the GET
  goes home;
- `load_by: prompt_size`: the home holds 200 of 200 KiB (cap ceil(1.25 * 201 / 2) = 126), so the
  GET spills to the other backend, and /metrics shows the 200 KiB in rondel_backend_in_flight_cost
  while it is in flight and 0 after.
The POST arrives whole at its backend either way (its body is not read for the key here).
"""
import threading
import unittest

from harness import Backend, Rondel, http_request, main, make_config, metric_sum, scrape, wait_until

POOL = "p"
BIG = 200 * 1024


class LoadByPromptSize(unittest.TestCase):
    def setUp(self):
        self.backends = [Backend(f"b{i}", "--delay-ms", "800") for i in range(2)]

    def tearDown(self):
        for b in self.backends:
            b.stop()

    def run_mode(self, load_by):
        rondel = Rondel(make_config(self.backends, pool={"hash_key": "header:X-Key",
                                                         "capacity_slack": 0,
                                                         "spill_memory": 0,
                                                         "load_by": load_by}))
        try:
            home = rondel.route(POOL, "k")["owner"]
            other = next(b.address for b in self.backends if b.address != home)
            big = {}

            def post():
                big["resp"] = http_request(rondel.port, "POST", "/big", headers={"X-Key": "k"},
                                           body=b"x" * BIG, timeout=20)
            t = threading.Thread(target=post)
            t.start()
            wait_until(lambda: metric_sum(scrape(rondel.admin_port)[1], "rondel_backend_in_flight",
                                          pool=POOL, backend=home) == 1,
                       timeout=10, interval=0.01, what="the big POST in flight at home")
            cost = metric_sum(scrape(rondel.admin_port)[1], "rondel_backend_in_flight_cost",
                              pool=POOL, backend=home)
            status, headers, _ = http_request(rondel.port, "GET", "/small", headers={"X-Key": "k"},
                                              timeout=20)
            t.join(timeout=20)
            self.assertEqual(status, 200)
            self.assertEqual(big["resp"][0], 200)
            names = {b.address: b.name for b in self.backends}
            self.assertEqual(big["resp"][1]["x-backend"], names[home])
            served = next(a for a, n in names.items() if n == headers["x-backend"])
            rondel.wait_idle()
            after = metric_sum(scrape(rondel.admin_port)[1], "rondel_backend_in_flight_cost",
                               pool=POOL)
            return served, home, other, cost, after
        finally:
            rondel.stop()

    def test_requests_go_home(self):
        served, home, _, cost, _ = self.run_mode("requests")
        self.assertEqual(served, home)
        self.assertEqual(cost, 0)  # no cost samples in a pool that counts requests

    def test_prompt_size_fills_the_home(self):
        served, home, other, cost, after = self.run_mode("prompt_size")
        self.assertEqual(cost, 200)
        self.assertEqual(served, other)
        self.assertEqual(after, 0)


if __name__ == "__main__":
    main()
