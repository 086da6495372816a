"""Range-chunk keys (pool range_chunk): the chunks of one object spread over the backends, every
request of one chunk (whatever its sub-range) reaches the same backend, and /api/route's
`range` parameter names that backend; requests without a single byte range hash as before."""
import json
import unittest
from urllib.parse import quote

from harness import BackendGroup, HttpConn, Rondel, http_get, main, make_config

MIB = 1 << 20
CHUNKS = 32


def fetch(port, target, ranges):
    """(status, X-Backend, body length) per Range value (None: no Range), pipelined."""
    out = []
    with HttpConn(port, timeout=20) as c:
        for r in ranges:
            c.request("GET", target, headers={"Range": r} if r else None)
        for _ in ranges:
            status, h, body = c.read_response()
            out.append((status, h["x-backend"], len(body)))
    return out


class RangeChunks(unittest.TestCase):
    def setUp(self):
        names = [f"rc{i}" for i in range(4)]
        self.group = BackendGroup(names, "--size", str(CHUNKS * MIB))
        # Explicit ids: the ring, and so each chunk's home, is the same on every run.
        backends = [{"address": m.address, "id": m.name} for m in self.group.members]
        self.rondel = Rondel(make_config(backends, pool={"hash_key": "path",
                                                         "range_chunk": "1MiB"}))

    def tearDown(self):
        self.rondel.stop()
        self.group.stop()

    def route(self, key, rng=None):
        q = f"/api/route?pool=p&key={quote(key, safe='')}"
        if rng:
            q += f"&range={quote(rng, safe='')}"
        return json.loads(http_get(self.rondel.admin_port, q)[2])

    def test_chunks_spread_and_each_chunk_sticks_to_one_backend(self):
        # Three requests per chunk: its start, a middle sub-range and one crossing into the next
        # chunk (placed by the chunk of its first byte).
        ranges = []
        for c in range(CHUNKS):
            base = c * MIB
            ranges += [f"bytes={base}-{base + 999}", f"bytes={base + 500000}-{base + 500099}",
                       f"bytes={base + MIB - 10}-{base + MIB + 9}"]
        got = fetch(self.rondel.port, "/big?v=1", ranges)
        self.assertTrue(all(s == 206 for s, _, _ in got), got[:6])
        self.assertEqual([n for _, _, n in got][:3], [1000, 100, 20])
        per_chunk = [got[3 * c:3 * c + 3] for c in range(CHUNKS)]
        homes = []
        for c, reqs in enumerate(per_chunk):
            names = {b for _, b, _ in reqs}
            self.assertEqual(len(names), 1, f"chunk {c} reached {names}")
            homes.append(names.pop())
        # 32 chunks over 4 equal backends: all four serve some (ids are fixed, so this is the
        # same answer every run; a hash that left one empty would be 4 * 0.75^32 = 4e-4 likely).
        self.assertEqual(len(set(homes)), 4, homes)
        # The explain API agrees chunk by chunk, with either spelling of the range.
        for c in (0, 1, 7, CHUNKS - 1):
            a = self.route("/big", f"bytes={c * MIB}-{c * MIB + 5}")
            b = self.route("/big", f"{c * MIB + 17}-")
            self.assertEqual(a["chosen"], homes[c], a)
            self.assertEqual(b["chosen"], homes[c], b)
            self.assertEqual(a["chunk"], str(c))
            self.assertEqual(a["range_chunk"], MIB)
        # A second pass gives the same homes (no drift, no spill at this load).
        again = fetch(self.rondel.port, "/big", [f"bytes={c * MIB}-{c * MIB}" for c in range(CHUNKS)])
        self.assertEqual([b for _, b, _ in again], homes)

    def test_no_single_range_hashes_as_the_whole_object(self):
        whole = self.route("/big")["chosen"]
        got = fetch(self.rondel.port, "/big", [None, "bytes=-100", "bytes=0-1,4194304-4194305"])
        self.assertEqual([b for _, b, _ in got], [whole] * 3, got)
        self.assertEqual([s for s, _, _ in got], [200, 206, 200])  # the backend ignores multi
        unchunked = self.route("/big", "bytes=-100")
        self.assertEqual(unchunked["chunk"], "")
        self.assertEqual(unchunked["hash"], self.route("/big")["hash"])


if __name__ == "__main__":
    main()
