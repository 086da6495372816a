"""JSON access-log format (deployment issue, logs part).

`log: {access_format: json}` writes one JSON object per line with the routing fields (owner,
backend, hops, outcome) the text format has, from every worker; a target with characters JSON
must escape stays one valid object; a request refused before its head has null method/target;
the text format is unchanged without the key (every other test parses it).
"""
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

from harness import RONDEL_BIN, Backend, Rondel, http_get, main, make_config

FIELDS = ["client", "method", "target", "status", "bytes_in", "bytes_out", "pool", "backend",
          "owner", "hops", "attempts", "duration_us", "outcome", "worker"]


def json_lines(path, count, timeout=5.0):
    """Every whole line of `path` parsed as JSON, once at least `count` are there (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = []
        if os.path.exists(path):
            with open(path) as f:
                lines = [l for l in f if l.endswith("\n")]
        if len(lines) >= count or time.monotonic() > deadline:
            return [json.loads(l) for l in lines]
        time.sleep(0.05)


def raw(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    out = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        out += chunk
        if b"\r\n\r\n" in out:
            break
    s.close()
    return out


class AccessJson(unittest.TestCase):
    def test_json_lines_carry_routing_fields(self):
        backends = [Backend("b1"), Backend("b2")]
        log = os.path.join(tempfile.mkdtemp(prefix="rondel-it-"), "access.log")
        rondel = Rondel(make_config(backends, top={"workers": 2},
                                    log={"access_log": log, "access_format": "json"}))
        n = 40
        for i in range(n):
            self.assertEqual(http_get(rondel.port, f"/obj/{i}")[0], 200)
        # Characters JSON escapes: a quote and a backslash in the target (percent-encoded in URLs
        # by clients, raw here), and a request line the parser refuses.
        odd = raw(rondel.port, b'GET /q?x="a\\b" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n')
        raw(rondel.port, b"NOT HTTP AT ALL\r\n\r\n")
        recs = json_lines(log, n + 2)
        self.assertGreaterEqual(len(recs), n + 2)
        ok = [r for r in recs if r["outcome"] == "ok" and r["target"].startswith("/obj/")]
        self.assertEqual(len(ok), n)
        for r in ok:
            self.assertEqual(list(r), FIELDS)
            self.assertEqual(r["status"], 200)
            self.assertEqual(r["pool"], "p")
            self.assertIn(r["backend"], [b.address for b in backends])
            self.assertIn(r["owner"], [b.address for b in backends])
            self.assertIsInstance(r["hops"], int)
            self.assertEqual(r["method"], "GET")
        odd_recs = [r for r in recs if r["target"] and "a\\b" in r["target"]]
        self.assertTrue(odd.startswith(b"HTTP/1.1 200"), odd[:80])  # the parser lets both through
        self.assertEqual(len(odd_recs), 1, recs[-3:])
        self.assertEqual(odd_recs[0]["target"], '/q?x="a\\b"')
        refused = [r for r in recs if r["status"] == 400 and r["method"] is None]
        self.assertTrue(refused, recs[-3:])
        self.assertIsNone(refused[0]["target"])
        self.assertEqual(refused[0]["outcome"], "rejected")
        self.assertEqual(rondel.stop(), 0)

    def test_unknown_format_is_a_config_error(self):
        backends = [Backend("b1")]
        text = make_config(backends, log={"access_format": "xml"})
        d = tempfile.mkdtemp(prefix="rondel-it-")
        path = os.path.join(d, "r.yaml")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, timeout=10)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr.decode(), r"r\.yaml:\d+:\d+: .*access_format")


if __name__ == "__main__":
    main()
