"""`rondel -c -f NEW --diff-against OLD`: the reload dry-run reports the share of the key space
rondel-sim measures for the same change.

Issue 18 part 5. For a renamed backend id, an added backend, a weight change and an algorithm
change, the daemon's report (2^20 sampled key hashes) and the simulator's own count (10^6 URI
keys, its own code path from pool to owner) agree within 1% of the key space; both sampling
errors are below 0.05% (binomial, sd <= sqrt(0.25 / 10^6)). The dry-run exits 0, names the
renamed backend and warns when the move is far above the ideal. POST /api/diff gives the same
preview of a posted file against the running configuration, which it leaves unchanged.
"""
import json
import os
import subprocess
import tempfile
import unittest

from harness import RONDEL_BIN, Rondel, main
from rondel_support import config
from rondel_support.httpio import http_request

SIM = os.environ.get("RONDEL_SIM", os.path.join(os.path.dirname(RONDEL_BIN), "..", "..",
                                                "tools", "sim", "rondel-sim"))
N = 20
POINTS = 160


def sim_id(g):
    """The id rondel-sim gives its backend number g."""
    return f"10.0.{g // 256}.{g % 256}:8080"


def pool_yaml(algo="ring", n=N, weights=None, rename=None):
    backends = []
    for g in range(n):
        w = weights[g] if weights else 1
        # A renamed backend: new address, and with it a new id (rondel-sim: number 65535 - g).
        addr = sim_id(65535 - g if g == rename else g)
        backends.append({"address": addr, "weight": w})
    return config.make_config(backends, pool={"algorithm": algo, "points_per_weight": POINTS})


def write(text):
    d = tempfile.mkdtemp(prefix="rondel-it-")
    path = os.path.join(d, "rondel.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def dry_run(old, new, *extra):
    p = subprocess.run([RONDEL_BIN, "-c", "-f", write(new), "--diff-against", write(old), *extra],
                       capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def sim_moved(*args):
    p = subprocess.run([SIM, "--backends", str(N), "--points", str(POINTS), "--keys", "1000000",
                        "--json", *args], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["moved"]


CASES = {
    # name: (old yaml, new yaml, rondel-sim flags)
    "renamed": (pool_yaml(), pool_yaml(rename=5), ["--algo", "ring", "--to-rename", "5"]),
    "added": (pool_yaml(), pool_yaml(n=N + 1), ["--algo", "ring", "--to-backends", str(N + 1)]),
    "weight": (pool_yaml(), pool_yaml(weights=[3 if g == 3 else 1 for g in range(N)]),
               ["--algo", "ring", "--to-weights", ",".join("3" if g == 3 else "1"
                                                           for g in range(N))]),
    "algorithm": (pool_yaml(), pool_yaml(algo="maglev"),
                  ["--algo", "ring", "--to-algo", "maglev"]),
    "skeleton_added": (pool_yaml(algo="skeleton_rendezvous"),
                       pool_yaml(algo="skeleton_rendezvous", n=N + 1),
                       ["--algo", "skeleton_rendezvous", "--to-backends", str(N + 1)]),
}


class ConfigDiff(unittest.TestCase):
    def report(self, name):
        old, new, _ = CASES[name]
        rc, out, err = dry_run(old, new, "--json")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(len(doc["pools"]), 1)
        return doc["pools"][0]

    def test_each_change_reports_the_share_the_simulator_measures(self):
        for name, (_, _, flags) in CASES.items():
            with self.subTest(change=name):
                pool = self.report(name)
                measured = sim_moved(*flags)
                print(f"{name}: rondel {pool['moved']:.5f} sim {measured:.5f} "
                      f"ideal {pool['ideal']:.5f}")
                self.assertAlmostEqual(pool["moved"], measured, delta=0.01)
                self.assertLess(pool["moved_stderr"], 0.0005)
                total = sum(m["share"] for m in pool["moves"])
                self.assertAlmostEqual(total, pool["moved"], delta=2e-6)

    def test_ideal_and_warnings(self):
        added = self.report("added")
        self.assertAlmostEqual(added["ideal"], 1 / (N + 1), delta=2e-6)
        self.assertEqual(added["warning"], "")
        self.assertTrue(all(m["to"] == sim_id(N) for m in added["moves"]), added["moves"])
        renamed = self.report("renamed")
        # Same position, new id: the same machine to the operator, so ideally nothing moves.
        self.assertAlmostEqual(renamed["ideal"], 0.0, delta=2e-6)
        self.assertIn("far above the ideal", renamed["warning"])
        self.assertIn(f"'{sim_id(5)}' became '{sim_id(65535 - 5)}'", renamed["warning"])
        # Its old id's keys leave, its new id's points take keys: nothing else moves.
        self.assertTrue(all(m["from"] == sim_id(5) or m["to"] == sim_id(65535 - 5)
                            for m in renamed["moves"]), renamed["moves"])
        algo = self.report("algorithm")
        self.assertIn("algorithm ring -> maglev", " ".join(algo["notes"]))
        self.assertNotEqual(algo["warning"], "")
        weight = self.report("weight")
        self.assertAlmostEqual(weight["ideal"], 19 * (1 / 20 - 1 / 22), delta=2e-6)
        self.assertEqual(weight["warning"], "")

    def test_text_report_and_exit_codes(self):
        old, new, _ = CASES["renamed"]
        rc, out, err = dry_run(old, new)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0], "OK")
        self.assertRegex(lines[1], r"^pool p: \d+\.\d\d% of the key space would change home "
                                   r"\(ideal 0\.00%; 1048576 sampled keys")
        self.assertTrue(any(l.split()[:2] == [sim_id(5), "->"] or l.split()[:1] == [sim_id(5)]
                            for l in lines), out)
        self.assertTrue(any(l.strip().startswith("warning:") for l in lines), out)
        # A broken OLD file: every error, exit 1, nothing on stdout.
        rc, out, err = dry_run("pools: [", new)
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertIn("error(s) in", err)
        # --diff-against without -c is a usage error.
        p = subprocess.run([RONDEL_BIN, "-f", write(new), "--diff-against", write(old)],
                           capture_output=True, timeout=10)
        self.assertEqual(p.returncode, 2)

    def test_admin_preview_of_a_posted_file(self):
        old, new, _ = CASES["added"]
        r = Rondel(old)
        try:
            status, _, body = http_request(r.admin_port, "POST", "/api/diff", body=new.encode())
            self.assertEqual(status, 200, body)
            pool = json.loads(body)["pools"][0]
            rc, out, err = dry_run(old, new, "--json")
            self.assertEqual(rc, 0, err)
            self.assertEqual(pool, json.loads(out)["pools"][0])  # same samples, same answer
            status, _, body = http_request(r.admin_port, "POST", "/api/diff", body=b"pools: [")
            self.assertEqual(status, 400)
            self.assertTrue(json.loads(body)["errors"][0].startswith("(posted):"), body)
            # Read-only: the running pool still has its N backends.
            self.assertEqual(len(r.pools()["pools"][0]["backends"]), N)
            status, _, _ = http_request(r.admin_port, "POST", "/api/pools", body=b"x")
            self.assertEqual(status, 405)
        finally:
            r.stop()


if __name__ == "__main__":
    main()
