"""Shared counts: the members of a fleet read each other's in-flight counts (`fleet: {peers,
share_load}`, issue 37).

Three rondel instances r1..r3 in one fixed fleet (`fleet: {peers: [...], id, share_load: 20ms}`),
each admin API on its own port of 127.0.0.1 (the counts go by UDP from and to those addresses),
in front of 4 test backends:
- r1 holds requests in flight (each delayed 10 s at the backend); r1 serves its counts per
  backend at GET /api/fleet/load, and r2 and r3, which hold none, compare exactly those counts in
  their bound: the `load` of every backend in their /api/route is r1's count (without sharing it
  would be N x 0 = 0), and their /api/fleet says the shared counts are fresh;
- one key sent through r1 and r2 in turn, each request held: its home takes what one balancer
  seeing all of them would give it (3 of 8), not what two members each counting their own
  requests N times would (4);
- r3 stops: within a few intervals r2's counts are no longer fresh (r3 does not answer), r2
  falls back to N x its own counts (every load 0 again) and still serves requests;
- counts sent from an address no member is listed at are rejected and move nothing;
- a pool one member lacks (renamed by a reload not yet everywhere) falls back to N x local;
- with `admin.token_file`, every datagram carries the token's HMAC-SHA256 of its counts: a
  member reloaded with another token is no longer listened to (nor listens), and an unsigned
  datagram is rejected.
"""
import hashlib
import hmac
import http.client
import json
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

from harness import Backend, Rondel, http_get, http_request, main, wait_until

INTERVAL = "20ms"
HOLD_MS = 10000
N_HELD = 12


def free_ports(n):
    """n ports free on 127.0.0.1 now, distinct (the members' admin ports, which each member's
    configuration must list before any of them starts)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def admin_json(r, path):
    status, _, body = http_request(r.admin_port, "GET", path)
    assert status == 200, (path, status, body)
    return json.loads(body)


class SharedLoad(unittest.TestCase):
    token = None  # admin.token_file's token on every member (SignedSharedLoad)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-it-shared-load-")
        self.backends = [Backend(f"s{i}") for i in range(4)]
        ports = free_ports(3)
        self.ids = ["r1", "r2", "r3"]
        peers = ", ".join(f"{{ id: {i}, admin: '127.0.0.1:{p}' }}" for i, p in zip(self.ids, ports))
        backends = ", ".join(f"{{ address: {b.address} }}" for b in self.backends)
        self.rondels, self.texts, self.token_files = [], [], []
        for name, port in zip(self.ids, ports):
            token = ""
            if self.token is not None:
                path = os.path.join(self.dir, f"{name}.token")
                with open(path, "w") as f:
                    f.write(self.token + "\n")
                self.token_files.append(path)
                token = f", token_file: {path}"
            text = ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                    "pools:\n  - name: p\n"
                    "    hash_key: path\n    capacity_slack: 0\n    spill_memory: 0\n"
                    "    hot_keys: { share: 0 }\n"
                    f"    backends: [{backends}]\n"
                    f"fleet: {{ peers: [{peers}], id: {name}, share_hot_keys: false, "
                    f"share_load: {INTERVAL} }}\n"
                    f"admin: {{ bind: 127.0.0.1:{port}{token} }}\nlog: {{ level: info }}\n")
            self.texts.append(text)
            self.rondels.append(Rondel(text, workdir=tempfile.mkdtemp(dir=self.dir)))
        self.held = []

    def tearDown(self):
        for c in self.held:
            c.close()
        # The backends first: the held requests then end at once (a stopping rondel finishes
        # the requests in flight).
        for b in self.backends:
            b.stop()
        for r in self.rondels:
            r.stop()

    def route(self, r, key):
        return admin_json(r, f"/api/route?pool=p&key={key}")

    def loads(self, r, key="/x"):
        """{backend id: load the bound compares} on r."""
        return {e["id"]: e["load"] for e in self.route(r, key)["preference"]}

    def hold(self, r, n):
        """n requests through r, each held at its backend (sent, not read)."""
        for i in range(n):
            c = http.client.HTTPConnection("127.0.0.1", r.port, timeout=30)
            c.putrequest("GET", f"/held/{i}?delay={HOLD_MS}")
            c.endheaders()
            self.held.append(c)

    def test_members_bound_by_each_others_counts(self):
        r1, r2, r3 = self.rondels
        # Every member answers the others: the counts are fresh everywhere.
        wait_until(lambda: all(admin_json(r, "/api/fleet")["load"]["fresh"] for r in self.rondels),
                   timeout=10, interval=0.05, what="shared counts fresh on every member")
        doc = admin_json(r2, "/api/fleet")["load"]
        self.assertEqual(doc["interval_ms"], 20)
        self.assertEqual(sorted(doc["members"]), ["r1", "r3"])
        self.assertTrue(all(m["answered"] and m["age_ms"] is not None
                            for m in doc["members"].values()), doc)
        self.hold(r1, N_HELD)
        ids = [f"{b.address}" for b in self.backends]

        def r1_counts():
            own = admin_json(r1, "/api/fleet/load")
            self.assertEqual(own["id"], "r1")
            return own["pools"]["p"]
        wait_until(lambda: sum(r1_counts().values()) == N_HELD, timeout=10, interval=0.05,
                   what=f"r1 holding {N_HELD} requests")
        held = r1_counts()
        self.assertEqual(sorted(held), sorted(ids))
        # r2 and r3 hold nothing, yet their bound compares r1's counts, one for one.
        for r in (r2, r3):
            wait_until(lambda r=r: self.loads(r) == held, timeout=5, interval=0.02,
                       what="r1's counts in the other members' bound")
        # And r2 serves as usual meanwhile.
        self.assertEqual(http_get(r2.port, "/served")[0], 200)

        # r3 stops: r2 no longer has every member's counts, and falls back to N x its own.
        r3.stop()
        wait_until(lambda: not admin_json(r2, "/api/fleet")["load"]["fresh"], timeout=5,
                   interval=0.02, what="r2 seeing r3's counts stale")
        self.assertEqual(self.loads(r2), {i: 0 for i in ids})
        self.assertEqual(http_get(r2.port, "/served")[0], 200)

    def test_a_probe_key_fills_home_then_spills_across_members(self):
        """Requests for one key sent through r1 and r2 alternately, each held at its backend:
        with the counts shared, the key's home takes no more than the pool's cap, whichever
        member sends them (each alone would grant its own N-scaled share)."""
        r1, r2, _ = self.rondels
        wait_until(lambda: all(admin_json(r, "/api/fleet")["load"]["fresh"] for r in self.rondels),
                   timeout=10, interval=0.05, what="shared counts fresh on every member")
        owner = self.route(r1, "/same")["owner"]
        for i in range(8):
            r = (r1, r2)[i % 2]
            # The sender sees every request in flight, the other member's too, before it picks.
            wait_until(lambda r=r, t=i: sum(self.loads(r).values()) == t, timeout=5,
                       interval=0.02, what=f"{i} requests in the sender's bound")
            c = http.client.HTTPConnection("127.0.0.1", r.port, timeout=30)
            c.putrequest("GET", f"/same?delay={HOLD_MS}&i={i}")
            c.endheaders()
            self.held.append(c)
        wait_until(lambda: sum(sum(admin_json(x, "/api/fleet/load")["pools"]["p"].values())
                               for x in (r1, r2)) == 8, timeout=5, interval=0.02,
                   what="8 requests in flight")
        on_owner = sum(admin_json(x, "/api/fleet/load")["pools"]["p"][owner] for x in (r1, r2))
        # One balancer seeing all 8 (4 backends, c = 1.25, no slack; the pick counts the new
        # request, so the cap is ceil(1.25 * (in flight + 1) / 4)): the home takes requests 0, 3
        # and 6 and holds 3. Without shared counts each member, counting its own requests 3
        # times, would send it 2, and the home would hold 4.
        self.assertEqual(on_owner, 3)
    def test_counts_only_from_a_listed_member_at_its_address(self):
        """Datagrams of counts carrying r1's id, sent from an address no member is listed at,
        are not taken: with r1 stopped (SIGSTOP), r2's shared counts go stale although forged
        r1 counts keep arriving, and its bound never compares them (50 a backend)."""
        r1, r2, _ = self.rondels
        self.wait_fresh()
        ids = [b.address for b in self.backends]
        forged = json.dumps({"id": "r1", "pools": {"p": {i: 50 for i in ids}}}).encode()
        r1.proc.send_signal(signal.SIGSTOP)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline:
                    s.sendto(self.sign(forged), ("127.0.0.1", r2.admin_port))
                    self.assertNotIn(50, self.loads(r2).values())
            doc = admin_json(r2, "/api/fleet")["load"]
            self.assertFalse(doc["fresh"], doc)
            self.assertGreaterEqual(doc["rejected"], 20, doc)
            self.assertEqual(self.loads(r2), {i: 0 for i in ids})
        finally:
            r1.proc.send_signal(signal.SIGCONT)
        self.wait_fresh()

    def test_a_pool_some_member_lacks_falls_back(self):
        """r3 reloaded with the pool renamed (a rolling reload half done): r2 no longer knows
        where r3 sends that pool's requests, so its bound for `p` falls back to N x its own
        counts (0 here) instead of r1's counts plus nothing from r3; back when r3 has `p`."""
        r1, r2, r3 = self.rondels
        self.wait_fresh()
        self.hold(r1, 6)
        ids = [b.address for b in self.backends]
        wait_until(lambda: sum(self.loads(r2).values()) == 6, timeout=10, interval=0.02,
                   what="r1's 6 requests in r2's bound")
        r3.reload(self.texts[2].replace("pool: p }", "pool: q }").replace("name: p\n", "name: q\n"))
        wait_until(lambda: self.loads(r2) == {i: 0 for i in ids}, timeout=5, interval=0.02,
                   what="r2's pool p back on its own counts")
        self.assertTrue(admin_json(r2, "/api/fleet")["load"]["fresh"])  # the members still send
        r3.reload(self.texts[2])
        wait_until(lambda: sum(self.loads(r2).values()) == 6, timeout=5, interval=0.02,
                   what="r1's counts back in r2's bound")

    def wait_fresh(self, members=None):
        wait_until(lambda: all(admin_json(r, "/api/fleet")["load"]["fresh"]
                               for r in members or self.rondels),
                   timeout=10, interval=0.05, what="shared counts fresh on every member")

    def sign(self, payload):
        """The datagram as a member sends it: signed with the admin token when there is one."""
        if self.token is None:
            return payload
        return hmac.new(self.token.encode(), payload, hashlib.sha256).hexdigest().encode() + \
            b"\n" + payload


class SignedSharedLoad(SharedLoad):
    """The same with `admin.token_file` on every member: each datagram carries the token's
    HMAC-SHA256 of its counts, and a member with another token is not listened to."""
    token = "s3cr3t-fleet"

    def test_a_member_with_another_token_is_not_taken(self):
        r1, r2, r3 = self.rondels
        self.wait_fresh()
        # r3 reloaded with another token: r1 and r2 reject its datagrams (their counts go
        # stale), and r3 rejects theirs.
        with open(self.token_files[2], "w") as f:
            f.write("another-token\n")
        r3.reload(self.texts[2])
        wait_until(lambda: not admin_json(r2, "/api/fleet")["load"]["fresh"], timeout=5,
                   interval=0.02, what="r2 no longer taking r3's counts")
        wait_until(lambda: admin_json(r3, "/api/fleet")["load"]["rejected"] >= 10, timeout=5,
                   interval=0.02, what="r3 rejecting the others' counts")
        self.assertGreaterEqual(admin_json(r1, "/api/fleet")["load"]["rejected"], 1)
        # A forged, unsigned datagram is rejected by a signed member too.
        before = admin_json(r2, "/api/fleet")["load"]["rejected"]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(json.dumps({"id": "r1", "pools": {}}).encode(), ("127.0.0.1", r2.admin_port))
        wait_until(lambda: admin_json(r2, "/api/fleet")["load"]["rejected"] > before, timeout=5,
                   interval=0.02, what="the unsigned datagram rejected")

if __name__ == "__main__":
    main()
