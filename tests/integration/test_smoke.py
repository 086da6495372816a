"""Smoke test: rondel proxies to four backends, a key sticks to one backend, counts return to 0."""
from harness import RondelTestCase, http_get, main


class Smoke(RondelTestCase):
    backend_names = [f"b{i}" for i in range(4)]

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
