"""Subsets through the daemon (backend `labels`, pool `subsets`): keys requested through a
subset land only on its members, and on the same backend as a pool of the members alone (ring
and rendezvous); listener, header and path-prefix selection; the bound over the members (a hot
key spills to another member, never to a non-member); no member up: 503 no_subset_member,
counted per subset; /api/route shows the subset used."""
import json
import socket
from urllib.parse import quote

from harness import (BackendGroup, HttpConn, RondelTestCase, http_get, main, metric_sum, scrape,
                     wait_until)

KEYS = [f"/s/{i}" for i in range(200)]
NAMES = [f"b{i}" for i in range(6)]
# b0, b2, b4: pci; b2, b3: ssd; b5 alone: gpu.
LABELS = {"b0": "[pci]", "b2": "[pci, ssd]", "b3": "[ssd]", "b4": "[pci]", "b5": "[gpu]"}
HOT_DELAY_MS = 1500


def backends(members, names):
    lines = []
    for m in members:
        if m.name in names:
            labels = f", labels: {LABELS[m.name]}" if m.name in LABELS else ""
            lines.append(f"      - {{address: {m.address}, id: {m.name}{labels}}}")
    return "\n".join(lines)


def config_text(members):
    def pool(name, algorithm, names, extra=""):
        return (f"  - name: {name}\n    algorithm: {algorithm}\n    points_per_weight: 160\n"
                f"    capacity_slack: 0\n    backends:\n{backends(members, names)}\n{extra}")
    subsets = """    subsets:
      - {name: secure, when: {listener: secure}, require: [pci]}
      - {name: cards, when: {path_prefix: /cards/}, require: [pci, ssd]}
      - {name: fast, when: {header: X-Tier, value: fast}, require: [ssd]}
"""
    # Health checks only where a backend goes down on purpose, so no other pool's keys move.
    gpu = """    health_check: {enabled: true, interval: 100ms, timeout: 2s, rise: 1, fall: 2}
    subsets:
      - {name: gpu, when: {path_prefix: /gpu/}, require: [gpu]}
"""
    listeners = [("web", "p"), ("secure", "p"), ("ref", "ref"), ("webr", "pr"), ("refr", "refr"),
                 ("gpu", "pg")]
    text = "listeners:\n" + "".join(
        f"  - {{name: {n}, bind: 127.0.0.1:0, pool: {p}}}\n" for n, p in listeners)
    text += "pools:\n"
    text += pool("p", "ring", NAMES[:5], subsets)
    text += pool("pg", "ring", ["b1", "b5"], gpu)
    text += pool("ref", "ring", ["b0", "b2", "b4"])
    text += pool("pr", "rendezvous", NAMES[:5], "    subsets:\n"
                 "      - {when: {header: X-Tier, value: fast}, require: [ssd]}\n")
    text += pool("refr", "rendezvous", ["b2", "b3"])
    return text + ("admin: {bind: 127.0.0.1:0}\n"
                   "log: {level: info, access_log: \"-\"}\n")


def served(port, targets, headers=""):
    """(status, X-Backend) per target, pipelined on one connection."""
    out = []
    with HttpConn(port, timeout=20) as c:
        for i in range(0, len(targets), 50):
            part = targets[i:i + 50]
            c.send(b"".join(f"GET {t} HTTP/1.1\r\nHost: t\r\n{headers}\r\n".encode()
                            for t in part))
            for _ in part:
                status, h, _ = c.read_response()
                out.append((status, h.get("x-backend")))
    return out


class Subsets(RondelTestCase):
    exit_status = None  # not checked here

    @classmethod
    def start_backends(cls):
        cls.group = BackendGroup(NAMES)
        return [cls.group]

    @classmethod
    def config(cls):
        return config_text(cls.group.members)

    def route(self, pool, key, extra=""):
        return json.loads(http_get(self.rondel.admin_port,
                                   f"/api/route?pool={pool}&key={quote(key, safe='')}{extra}")[2])

    def test_listener_subset_equals_a_pool_of_its_members_ring(self):
        got = served(self.rondel.ports["secure"], KEYS)
        ref = served(self.rondel.ports["ref"], KEYS)
        self.assertTrue(all(s == 200 for s, _ in got + ref))
        self.assertEqual([b for _, b in got], [b for _, b in ref])
        self.assertEqual({b for _, b in got}, {"b0", "b2", "b4"})
        whole = {b for _, b in served(self.rondel.port, KEYS)}
        self.assertTrue(whole - {"b0", "b2", "b4"})  # without the subset: other backends too
        r = self.route("p", KEYS[0], "&listener=secure")
        self.assertEqual(r["subset"], "secure")
        self.assertEqual(r["require"], ["pci"])
        self.assertEqual(r["subset_members"], 3)
        self.assertEqual(r["chosen"], got[0][1])
        self.assertEqual({p["id"] for p in r["preference"]}, {"b0", "b2", "b4"})
        self.assertEqual(self.route("p", KEYS[0])["subset"], "")
        pools = {p["name"]: p for p in self.rondel.pools()["pools"]}
        labels = {b["id"]: b["labels"] for b in pools["p"]["backends"]}
        self.assertEqual(labels["b2"], ["pci", "ssd"])
        self.assertEqual(labels["b1"], [])

    def test_header_subset_equals_a_pool_of_its_members_rendezvous(self):
        got = served(self.rondel.ports["webr"], KEYS, "X-Tier: fast\r\n")
        ref = served(self.rondel.ports["refr"], KEYS)
        self.assertEqual([b for _, b in got], [b for _, b in ref])
        self.assertEqual({b for _, b in got}, {"b2", "b3"})
        other = served(self.rondel.ports["webr"], KEYS, "X-Tier: slow\r\n")
        self.assertTrue({b for _, b in other} - {"b2", "b3"})
        self.assertEqual(self.route("pr", KEYS[1], "&header=X-Tier:fast")["chosen"], got[1][1])

    def test_path_prefix_and_first_match(self):
        got = served(self.rondel.port, [f"/cards/{i}" for i in range(40)])
        self.assertEqual({b for _, b in got}, {"b2"})  # pci and ssd: b2 alone
        # On the secure listener the listener rule comes first: pci members.
        first = served(self.rondel.ports["secure"], [f"/cards/{i}" for i in range(40)])
        self.assertEqual({b for _, b in first}, {"b0", "b2", "b4"})
        fast = served(self.rondel.port, KEYS[:60], "X-Tier: fast\r\n")
        self.assertEqual({b for _, b in fast}, {"b2", "b3"})
        self.assertEqual(self.route("p", "/cards/1", "&path=/cards/1")["subset"], "cards")

    def test_hot_key_spills_to_members_only(self):
        # Concurrent requests for one key, each held HOT_DELAY_MS by its backend: the owner
        # fills to its cap over the subset's members (capacity_slack 0) and the rest spill.
        n = 12
        target = f"/hot?delay={HOT_DELAY_MS}"
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.rondel.ports["secure"]), timeout=20)
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
            socks.append(s)
        seen = []
        for s in socks:
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            s.close()
            head = data.split(b"\r\n\r\n", 1)[0].decode()
            self.assertTrue(head.startswith("HTTP/1.1 200"), head)
            seen.append(next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                             if line.lower().startswith("x-backend:")))
        self.assertTrue(set(seen) <= {"b0", "b2", "b4"}, seen)
        self.assertGreater(len(set(seen)), 1, seen)  # the owner's cap was reached: spills

    def test_no_member_up_answers_503_and_counts(self):
        b5 = next(m for m in self.group.members if m.name == "b5")
        port = int(b5.address.rsplit(":", 1)[1])
        self.assertEqual(http_get(port, "/_health?fail=1")[0], 200)
        try:
            wait_until(lambda: self.route("pg", "/gpu/x", "&path=/gpu/x")["chosen"] == "",
                       what="b5 to be down")
            start = self.rondel.out.count()
            # rondel closes the connection after its own 503: one connection each.
            gpu = self.rondel.ports["gpu"]
            statuses = [http_get(gpu, t)[0] for t in ("/gpu/1", "/gpu/2")]
            self.assertEqual(http_get(gpu, "/other")[0], 200)  # the rest of the pool: b1
            self.assertEqual(statuses, [503, 503])
            self.rondel.out.wait_for(r"access .*outcome=no_subset_member", start=start)
            _, samples, _ = scrape(self.rondel.admin_port)
            self.assertEqual(metric_sum(samples, "rondel_subset_unavailable_total", pool="pg",
                                        subset="gpu"), 2)
            self.assertGreaterEqual(metric_sum(samples, "rondel_rejected_requests_total",
                                               reason="no_subset_member"), 2)
            self.assertGreaterEqual(metric_sum(samples, "rondel_subset_requests_total", pool="pg",
                                               subset="gpu"), 2)
        finally:
            http_get(port, "/_health?fail=0")


if __name__ == "__main__":
    main()
