"""Gradual migration through the daemon (pool `previous`, `migrate_percent`): each request goes
to the home of the placement /api/route says applied, /api/route shows both homes, the metric
counts requests per placement, and reloads raising the percent move keys to their new home and
never back."""
import unittest

from harness import BackendGroup, Rondel, main, make_config, metric_sum, scrape
from test_proxy_routing import route_many

KEYS = [f"/mig/{i}" for i in range(300)]


def config_text(members, percent):
    # New placement: maglev over all four; previous: a ring over the first three.
    backends = [{"address": m.address, "id": m.name} for m in members]
    prev = ", ".join(f"{{id: {m.name}}}" for m in members[:3])
    return make_config(backends, pool={
        "algorithm": "maglev", "migrate_percent": percent,
        "previous": f"{{algorithm: ring, points_per_weight: 160, backends: [{prev}]}}"})


class Migration(unittest.TestCase):
    def setUp(self):
        self.group = BackendGroup([f"m{i}" for i in range(4)])
        self.rondel = Rondel(config_text(self.group.members, 0))

    def tearDown(self):
        self.rondel.stop()
        self.group.stop()

    def homes(self):
        """(backend served, /api/route answer) per key."""
        served = route_many(self.rondel.port, KEYS)
        return served, [self.rondel.route("p", k) for k in KEYS]

    def test_percent_steps_move_keys_to_their_new_home_and_never_back(self):
        served0, routes0 = self.homes()
        self.assertTrue(all(r["placement"] == "previous" for r in routes0))
        self.assertEqual(served0, [r["previous_home"] for r in routes0])
        self.assertNotIn("m3", served0)  # the previous ring has no m3
        new_home = [r["current_home"] for r in routes0]
        differ = sum(a != b for a, b in zip(served0, new_home))
        self.assertGreater(differ, 150)
        on_new = [False] * len(KEYS)
        previous_count = 0
        for percent in (30, 60, 100):
            self.rondel.reload(config_text(self.group.members, percent))
            served, routes = self.homes()
            for i, (b, r) in enumerate(zip(served, routes)):
                want = r["current_home"] if r["placement"] == "current" else r["previous_home"]
                self.assertEqual(b, want, (KEYS[i], r))
                self.assertEqual(r["migrate_percent"], percent)
                if on_new[i]:
                    self.assertEqual(r["placement"], "current", (percent, KEYS[i]))
                on_new[i] = r["placement"] == "current"
            previous_count += sum(r["placement"] == "previous" for r in routes)
        self.assertTrue(all(on_new))
        _, samples, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_placement_requests_total", pool="p",
                                    placement="previous"), len(KEYS) + previous_count)
        self.assertEqual(metric_sum(samples, "rondel_placement_requests_total", pool="p"),
                         4 * len(KEYS))


if __name__ == "__main__":
    main()
