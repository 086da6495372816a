"""Smoke test: rondel proxies to four backends, a key sticks to one backend, counts return to 0."""
import unittest

from harness import Backend, Rondel, http_get, make_config, main


class Smoke(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend(f"b{i}") for i in range(4)]
        cls.rondel = Rondel(make_config(cls.backends))

    @classmethod
    def tearDownClass(cls):
        assert cls.rondel.stop() == 0
        for b in cls.backends:
            b.stop()

    def test_same_key_same_backend(self):
        seen = set()
        for _ in range(20):
            status, headers, _ = http_get(self.rondel.port, "/obj/42")
            self.assertEqual(status, 200)
            seen.add(headers["x-backend"])
        self.assertEqual(len(seen), 1)
        route = self.rondel.route("p", "/obj/42")
        owner = [b for b in self.backends if b.address == route["owner"]][0]
        self.assertEqual(seen, {owner.name})

    def test_counts_return_to_zero(self):
        for i in range(50):
            http_get(self.rondel.port, f"/k/{i}")
        self.rondel.wait_idle()


if __name__ == "__main__":
    main()
