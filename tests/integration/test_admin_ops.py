"""Runtime operations on the admin listener (fleet issue, part 3): PUT/GET
/api/pools/{pool}/backends/{id} with {"state": "ready"|"drain"|"maint", "weight": N}.

- drain: a slow request already on the backend finishes there, while new requests for its keys
  go to the next backend in their preference order; ready brings the keys back.
- maint: out of rotation, visible in /api/pools and rondel_backend_admin_state.
- weight: a new weight (the placement and its fingerprint change), null restores the configured one.
- Writes need the bearer token of admin.token_file (401 without, 403 wrong, 403 when no token
  file is configured); bad requests get clear JSON errors (400, 404, 405, 413).
- The settings survive SIGHUP and a restart (admin.state_file, one JSON object per line).
"""
import json
import os
import subprocess
import tempfile
import threading
import unittest

from harness import (RONDEL_BIN, Backend, Rondel, http_get, http_request, main, make_config,
                     metric_sum, scrape, wait_until)

TOKEN = "s3cret-token-for-tests"


def backend_path(pool, backend_id):
    return f"/api/pools/{pool}/backends/{backend_id}"


def put(rondel, backend_id, body, token=TOKEN, pool="p"):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    status, hdrs, out = http_request(rondel.admin_port, "PUT", backend_path(pool, backend_id),
                                     headers=headers, body=data)
    return status, hdrs, json.loads(out) if out else None


def get(rondel, backend_id, pool="p"):
    status, _, out = http_get(rondel.admin_port, backend_path(pool, backend_id))
    return status, json.loads(out)


def pool_view(rondel):
    return rondel.pools()["pools"][0]


def keys_owned_by(rondel, backend_id, n, prefix="/k/"):
    out = []
    for i in range(5000):
        key = f"{prefix}{i}"
        if rondel.route("p", key)["owner"] == backend_id:
            out.append(key)
            if len(out) == n:
                break
    return out


class Operations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-ops-")
        cls.token_file = os.path.join(cls.dir, "token")
        with open(cls.token_file, "w") as f:
            f.write(TOKEN + "\n")
        cls.state_file = os.path.join(cls.dir, "state.jsonl")
        cls.backends = [Backend(f"b{i}") for i in range(3)]
        # Two workers: the admin flag set on the daemon's loop must reach the other worker's picks.
        cls.config = make_config(cls.backends, pool={"hash_key": "path"}, top={"workers": 2},
                                 admin={"token_file": cls.token_file,
                                        "state_file": cls.state_file})
        cls.rondel = Rondel(cls.config, workdir=cls.dir)

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        for b in cls.backends:
            b.stop()
        assert code == 0, code

    def tearDown(self):
        for b in self.backends:  # every test leaves the pool as configured
            put(self.rondel, b.address, {"state": "ready", "weight": None})

    def test_get_shows_the_state(self):
        status, view = get(self.rondel, self.backends[0].address)
        self.assertEqual(status, 200)
        self.assertEqual(view["state"], "ready")
        self.assertEqual(view["weight"], 1)
        self.assertFalse(view["weight_override"])
        self.assertTrue(view["usable"])

    def test_writes_need_the_token(self):
        b = self.backends[0].address
        status, hdrs, err = put(self.rondel, b, {"state": "maint"}, token=None)
        self.assertEqual(status, 401)
        self.assertIn("bearer", hdrs.get("www-authenticate", "").lower())
        self.assertIn("bearer token", err["error"])
        status, _, err = put(self.rondel, b, {"state": "maint"}, token="wrong")
        self.assertEqual(status, 403)
        self.assertEqual(err["error"], "wrong token")
        status, _, err = put(self.rondel, b, {"state": "maint"}, token=TOKEN + "x")
        self.assertEqual(status, 403)
        self.assertEqual(get(self.rondel, b)[1]["state"], "ready")  # nothing changed

    def test_bad_requests_get_clear_errors(self):
        b = self.backends[0].address
        cases = [
            ("{", 400, "bad JSON: incomplete JSON at byte 1"),
            ('{"state": "paused"}', 400, '"state" must be'),
            ('{"state": 1}', 400, '"state" must be'),
            ('{"weight": -1}', 400, '"weight" must be'),
            ('{"weight": 1.5}', 400, '"weight" must be'),
            ('{"weight": 70000}', 400, '"weight" must be'),
            ('{"colour": "red"}', 400, 'unknown field "colour"'),
            ('{}', 400, "nothing to change"),
            ('{"state": {"x": 1}}', 400, '"state" must be'),
            ('{"weight": 1e2}', 400, '"weight" must be'),
            ('{"state": "drain",}', 400, "bad JSON: syntax error at byte 18"),
            ('[{"state": "drain"}]', 400, "bad JSON: expected one JSON object, got an array"),
        ]
        for body, want_status, want_text in cases:
            status, hdrs, err = put(self.rondel, b, body)
            self.assertEqual(status, want_status, body)
            self.assertEqual(hdrs["content-type"], "application/json")
            self.assertIn(want_text, err["error"], body)
        status, _, err = put(self.rondel, b, {"state": "drain"}, pool="nope")
        self.assertEqual((status, err["error"]), (404, 'no pool named "nope"'))
        status, _, err = put(self.rondel, "10.9.9.9:1", {"state": "drain"})
        self.assertEqual(status, 404)
        self.assertIn('has no backend "10.9.9.9:1"', err["error"])
        for method in ("POST", "DELETE", "PATCH"):
            status, hdrs, body = http_request(self.rondel.admin_port, method, backend_path("p", b),
                                              headers={"Authorization": f"Bearer {TOKEN}"},
                                              body="{}")
            self.assertEqual(status, 405, method)
            self.assertIn("PUT", hdrs["allow"])
            self.assertIn("error", json.loads(body))
        status, _, _ = put(self.rondel, b, '{"state": "' + "x" * 5000 + '"}')
        self.assertEqual(status, 413)
        self.assertEqual(get(self.rondel, b)[1]["state"], "ready")

    def test_a_weight_that_leaves_no_placement_is_refused_with_409(self):
        fp = pool_view(self.rondel)["fingerprint"]
        for b in self.backends[:2]:
            self.assertEqual(put(self.rondel, b.address, {"weight": 0})[0], 200)
        status, _, err = put(self.rondel, self.backends[2].address, {"weight": 0})
        self.assertEqual(status, 409)
        self.assertIn("all backend weights are zero", err["error"])
        self.assertEqual(get(self.rondel, self.backends[2].address)[1]["weight"], 1)  # unchanged
        self.assertEqual(http_get(self.rondel.port, "/any")[1]["x-backend"], self.backends[2].name)
        for b in self.backends[:2]:
            put(self.rondel, b.address, {"weight": None})
        self.assertEqual(pool_view(self.rondel)["fingerprint"], fp)

    def test_drain_lets_in_flight_finish_and_sends_new_requests_to_the_next_backend(self):
        victim = self.backends[1]
        keys = keys_owned_by(self.rondel, victim.address, 20)
        self.assertEqual(len(keys), 20)
        slow_result = {}

        def slow():
            slow_result["r"] = http_get(self.rondel.port, keys[0] + "?delay=1500", timeout=20)

        t = threading.Thread(target=slow)
        t.start()
        try:
            wait_until(lambda: get(self.rondel, victim.address)[1]["in_flight"] == 1, timeout=5,
                       what="the slow request in flight on the victim")
            start = self.rondel.out.count()
            status, _, view = put(self.rondel, victim.address, {"state": "drain"})
            self.assertEqual(status, 200)
            self.assertEqual((view["state"], view["usable"], view["in_flight"]),
                             ("drain", False, 1))
            self.rondel.out.wait_for(
                rf"backend_admin_change pool=p backend={victim.address} state=drain "
                r"weight=configured was=ready", timeout=5, start=start)
            for k in keys:
                r = self.rondel.route("p", k)
                self.assertEqual(r["owner"], victim.address)  # placement unchanged
                nxt = [b["id"] for b in r["preference"] if b["id"] != victim.address][0]
                self.assertEqual(r["chosen"], nxt, k)  # the next in its preference order
                status, headers, _ = http_get(self.rondel.port, k)
                self.assertEqual(status, 200)
                self.assertEqual(f"127.0.0.1:{self.port_of(headers['x-backend'])}", nxt)
            # No "still running" check here: these 20 requests need not fit inside the slow
            # one's 1.5 s on a busy machine. The drain's view (in_flight 1) and the slow
            # request's 200 from the victim below show it was in flight at the drain and ended.
        finally:
            t.join(timeout=20)
        status, headers, _ = slow_result["r"]
        self.assertEqual((status, headers["x-backend"]), (200, victim.name))
        put(self.rondel, victim.address, {"state": "ready"})
        for k in keys[:5]:
            self.assertEqual(http_get(self.rondel.port, k)[1]["x-backend"], victim.name)

    def port_of(self, name):
        return next(b.port for b in self.backends if b.name == name)

    def test_maint_takes_the_backend_out_and_shows_in_views_and_metrics(self):
        victim = self.backends[2]
        keys = keys_owned_by(self.rondel, victim.address, 10)
        status, _, view = put(self.rondel, victim.address, {"state": "maint"})
        self.assertEqual((status, view["state"], view["usable"]), (200, "maint", False))
        row = {b["id"]: b for b in pool_view(self.rondel)["backends"]}[victim.address]
        self.assertEqual(row["admin_state"], "maint")
        _, samples, _ = scrape(self.rondel.admin_port)
        for state, want in (("maint", 1), ("ready", 0), ("drain", 0)):
            self.assertEqual(metric_sum(samples, "rondel_backend_admin_state", pool="p",
                                        backend=victim.address, state=state), want, state)
        self.assertEqual(metric_sum(samples, "rondel_pool_unusable_backends", pool="p"), 1)
        for k in keys:
            self.assertNotEqual(http_get(self.rondel.port, k)[1]["x-backend"], victim.name)
        put(self.rondel, victim.address, {"state": "ready"})
        _, samples, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(samples, "rondel_backend_admin_state", pool="p",
                                    backend=victim.address, state="ready"), 1)
        self.assertEqual(http_get(self.rondel.port, keys[0])[1]["x-backend"], victim.name)

    def test_weight_changes_placement_and_fingerprint_and_null_restores_it(self):
        b = self.backends[0].address
        before = pool_view(self.rondel)
        status, _, view = put(self.rondel, b, {"weight": 4})
        self.assertEqual((status, view["weight"], view["weight_override"], view["state"]),
                         (200, 4, True, "ready"))
        after = pool_view(self.rondel)
        self.assertNotEqual(after["fingerprint"], before["fingerprint"])
        shares = {x["id"]: x["key_share"] for x in after["backends"]}
        self.assertGreater(shares[b], 0.5)  # 4 of 6 weight units
        status, _, view = put(self.rondel, b, {"weight": None})
        self.assertEqual((status, view["weight"], view["weight_override"]), (200, 1, False))
        self.assertEqual(pool_view(self.rondel)["fingerprint"], before["fingerprint"])

    def ctl(self, *args, token_file=None):
        r = subprocess.run([RONDEL_BIN, "ctl", "--admin", f"127.0.0.1:{self.rondel.admin_port}",
                            "--token-file", token_file or self.token_file, *args],
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def test_rondel_ctl_drives_the_same_operations(self):
        b = self.backends[1].address
        code, out, _ = self.ctl("drain", "p", b)
        self.assertEqual((code, json.loads(out)["state"]), (0, "drain"))
        code, out, _ = self.ctl("show", "p", b)
        self.assertEqual((code, json.loads(out)["usable"]), (0, False))
        code, out, _ = self.ctl("weight", "p", b, "3")
        self.assertEqual((code, json.loads(out)["weight"]), (0, 3))
        code, out, _ = self.ctl("weight", "p", b, "config")
        self.assertEqual((code, json.loads(out)["weight"]), (0, 1))
        code, out, _ = self.ctl("ready", "p", b)
        self.assertEqual((code, json.loads(out)["state"]), (0, "ready"))
        code, _, err = self.ctl("maint", "p", "10.1.1.1:9")
        self.assertEqual(code, 1)
        self.assertIn("HTTP 404", err)
        wrong = os.path.join(self.dir, "wrong-token")
        with open(wrong, "w") as f:
            f.write("nope\n")
        code, _, err = self.ctl("drain", "p", b, token_file=wrong)
        self.assertEqual(code, 1)
        self.assertIn("HTTP 403", err)
        self.assertEqual(self.ctl("weight", "p", b, "-4")[0], 2)
        self.assertEqual(self.ctl("pause", "p", b)[0], 2)
        self.assertEqual(get(self.rondel, b)[1]["state"], "ready")

    def test_ui_shows_admin_state_and_fingerprint(self):
        status, _, body = http_get(self.rondel.admin_port, "/ui")
        self.assertEqual(status, 200)
        self.assertIn(b"b.admin_state", body)
        self.assertIn(b"pool.fingerprint", body)


class Persistence(unittest.TestCase):
    def test_settings_survive_sighup_and_restart(self):
        d = tempfile.mkdtemp(prefix="rondel-ops-")
        token_file = os.path.join(d, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN)
        state_file = os.path.join(d, "state.jsonl")
        backends = [Backend(f"s{i}") for i in range(3)]
        try:
            cfg = make_config(backends, admin={"token_file": token_file, "state_file": state_file})
            rondel = Rondel(cfg, workdir=d)
            self.assertEqual(put(rondel, backends[0].address, {"state": "drain"})[0], 200)
            self.assertEqual(put(rondel, backends[1].address, {"weight": 3, "state": "maint"})[0],
                             200)
            fp = pool_view(rondel)["fingerprint"]
            with open(state_file) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual(sorted((x["backend"], x["state"], x.get("weight")) for x in lines),
                             sorted([(backends[0].address, "drain", None),
                                     (backends[1].address, "maint", 3)]))
            self.assertFalse(os.path.exists(state_file + ".tmp"))

            def states(r):
                return {b["id"]: (b["admin_state"], b["weight"]) for b in pool_view(r)["backends"]}

            want = {backends[0].address: ("drain", 1), backends[1].address: ("maint", 3),
                    backends[2].address: ("ready", 1)}
            rondel.reload()
            self.assertEqual(states(rondel), want)
            self.assertEqual(pool_view(rondel)["fingerprint"], fp)
            self.assertEqual(rondel.stop(), 0)

            rondel = Rondel(cfg, workdir=d)
            rondel.out.wait_for(r"admin_state_loaded file=\S+ entries=2", timeout=5)
            self.assertEqual(states(rondel), want)
            self.assertEqual(pool_view(rondel)["fingerprint"], fp)
            self.assertEqual(http_get(rondel.port, "/x")[1]["x-backend"], "s2")  # the one left
            self.assertEqual(rondel.stop(), 0)
        finally:
            for b in backends:
                b.stop()

    def test_maint_pauses_active_health_checks_and_drain_does_not(self):
        d = tempfile.mkdtemp(prefix="rondel-ops-")
        token_file = os.path.join(d, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN)
        backends = [Backend(f"h{i}") for i in range(2)]
        health = "{ enabled: true, interval: 100ms, timeout: 500ms, rise: 1, fall: 2 }"
        try:
            rondel = Rondel(make_config(backends, pool={"health_check": health},
                                        admin={"token_file": token_file}))
            victim, other = backends[0].address, backends[1].address

            def checks(b):
                _, samples, _ = scrape(rondel.admin_port)
                return metric_sum(samples, "rondel_backend_health_checks_total", pool="p",
                                  backend=b)

            def after_other_checks(n):
                """Victim's probe count once the other backend had n more (n intervals)."""
                start = checks(other)
                wait_until(lambda: checks(other) >= start + n, timeout=10,
                           what=f"{n} more checks of the other backend")
                return checks(victim)

            self.assertEqual(put(rondel, victim, {"state": "drain"})[0], 200)
            v0 = checks(victim)
            self.assertGreaterEqual(after_other_checks(4), v0 + 2)  # drain: still checked
            self.assertEqual(put(rondel, victim, {"state": "maint"})[0], 200)
            v1 = checks(victim)
            # At most the probe already under way when maint was set completes.
            self.assertLessEqual(after_other_checks(5), v1 + 1)
            self.assertEqual(put(rondel, victim, {"state": "ready"})[0], 200)
            v2 = checks(victim)
            self.assertGreaterEqual(after_other_checks(4), v2 + 2)  # checked again
            self.assertEqual(rondel.stop(), 0)
        finally:
            for b in backends:
                b.stop()

    def test_without_a_token_file_the_admin_is_read_only(self):
        backends = [Backend("r0")]
        try:
            rondel = Rondel(make_config(backends))
            status, _, err = put(rondel, backends[0].address, {"state": "drain"})
            self.assertEqual(status, 403)
            self.assertIn("read-only", err["error"])
            self.assertEqual(get(rondel, backends[0].address)[1]["state"], "ready")
            self.assertEqual(rondel.stop(), 0)
        finally:
            backends[0].stop()

    def test_an_unreadable_token_file_stops_the_start(self):
        backends = [Backend("u0")]
        try:
            rondel = Rondel(make_config(backends, admin={"token_file": "/nonexistent/token"}),
                            expect_start=False)
            rondel.out.wait_for(r"admin_token_unreadable", timeout=5)
            rondel.proc.wait(timeout=10)
            self.assertNotEqual(rondel.proc.returncode, 0)
        finally:
            backends[0].stop()


if __name__ == "__main__":
    main()
