"""hash_key: llm_prefix through the real daemon (issue 35): rondel reads an inference request's
JSON body as it arrives, routes by its prompt anchors, and forwards the body byte for byte.

- Every turn of a conversation lands on one backend (30 conversations x 4 turns, unloaded).
- The same body over HTTP/1.1 (Content-Length and chunked) and HTTP/2 lands on the same backend;
  a second rondel instance with the same config routes every request alike.
- A hot tenant (one system prompt carrying all the traffic) is spread over its set: its
  conversations reach several backends once the detector has seen it, each still on one.
- Bodies reach the backend byte for byte (CRC-32 and length, from rondel-test-backend
  --checksum): JSON, chunked, gzip-encoded, malformed and 64 MiB; with the anchors in the first
  2 KB, at most 8 KiB is read before the decision.
- Fallbacks are counted by reason, and POST /api/route explains with hashes only.
- Balanced tenant homes (the default, LlmBalancedHomesTest): 16 tenants on 8 backends are 2 a
  backend once each has been seen, every turn of their conversations stays on one backend, and a
  second instance that has seen the same tenants routes every request alike. The first class
  runs `tenant_homes: hashed`, where all of that holds from the very first request.
"""
from collections import Counter
import gzip
import http.client
import json
import os
import random
import subprocess
import zlib

from harness import (Rondel, RondelTestCase, http_get, main, make_config, metric_sum, scrape,
                     wait_until)

N_BACKENDS = 4


def chat(system, turns, extra=None):
    msgs = [] if system is None else [{"role": "system", "content": system}]
    for i, q in enumerate(turns):
        msgs.append({"role": "user", "content": q})
        if i + 1 < len(turns):
            msgs.append({"role": "assistant", "content": f"answer {i} to {q}"})
    body = {"model": "m", "messages": msgs, "max_tokens": 8}
    body.update(extra or {})
    return json.dumps(body).encode()


def crc(b):
    return "%08x" % (zlib.crc32(b) & 0xFFFFFFFF)


class LlmClient:
    """POSTs inference bodies through rondel and reads where they landed."""

    def post(self, body, headers=None, port=None, path="/v1/chat/completions"):
        """(status, lower-cased headers, body); a Transfer-Encoding header sends it chunked."""
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=30)
        try:
            h = {"Content-Type": "application/json", **(headers or {})}
            if "Transfer-Encoding" in h:
                del h["Transfer-Encoding"]
                conn.request("POST", path, body=iter([body[:1000], body[1000:]]), headers=h,
                             encode_chunked=True)
            else:
                conn.request("POST", path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    def backend_of(self, body, **kw):
        status, h, _ = self.post(body, **kw)
        self.assertEqual(status, 200)
        self.assertEqual(h.get("x-request-crc32"), crc(body), "the body changed on its way")
        return h["x-backend"]


class LlmPrefixTest(LlmClient, RondelTestCase):
    backend_names = tuple(f"b{i}" for i in range(N_BACKENDS))
    backend_args = ("--checksum",)
    use_dir = True

    @classmethod
    def config(cls):
        text = make_config(cls.backends, pool={
            "hash_key": "llm_prefix", "algorithm": "rendezvous",
            "hot_keys": "{share: 100, window: 400ms, min_count: 8}",
            "llm_prefix": "{tenant_homes: hashed}"},
            log={"access_log": os.path.join(cls.dir, "access.log")})
        h2 = "  - name: h2\n    bind: 127.0.0.1:0\n    pool: p\n    http2: prior_knowledge\n"
        return text.replace("pools:\n", h2 + "pools:\n", 1)

    def keys(self, source):
        return metric_sum(scrape(self.rondel.admin_port)[1], "rondel_llm_keys_total",
                          source=source)

    def test_every_turn_of_a_conversation_lands_on_one_backend(self):
        rng = random.Random(7)
        homes = set()
        for c in range(30):
            system = f"tenant {c % 3} system prompt " + "x" * rng.randrange(100, 3000)
            questions = [f"conversation {c} question {k} " + "q" * rng.randrange(10, 500)
                         for k in range(4)]
            seen = {self.backend_of(chat(system, questions[:k + 1])) for k in range(4)}
            self.assertEqual(len(seen), 1, f"conversation {c} moved: {seen}")
            homes |= seen
        self.assertGreaterEqual(self.keys("anchor"), 120)

    def test_http1_http2_and_chunked_bodies_land_alike(self):
        curl_h2 = ["curl", "-s", "-o", "/dev/null", "-D", "-", "--http2-prior-knowledge",
                   "-H", "content-type: application/json", "--data-binary", "@-",
                   f"http://127.0.0.1:{self.rondel.ports['h2']}/v1/chat/completions"]
        for c in range(10):
            body = chat(f"system {c}", [f"hello {c}"])
            h1 = self.backend_of(body)
            chunked = self.backend_of(body, headers={"Transfer-Encoding": "chunked"})
            out = subprocess.run(curl_h2, input=body, capture_output=True, timeout=10).stdout
            head = {ln.split(b":", 1)[0].strip().lower(): ln.split(b":", 1)[1].strip()
                    for ln in out.split(b"\r\n") if b":" in ln}
            self.assertEqual(head.get(b"x-request-crc32", b"").decode(), crc(body))
            self.assertEqual({h1, chunked, head[b"x-backend"].decode()}, {h1})

    def test_two_instances_route_every_request_alike(self):
        other = Rondel(self.config().replace(os.path.join(self.dir, "access.log"),
                                             os.path.join(self.dir, "access2.log")))
        try:
            for c in range(20):
                body = chat(f"tenant {c % 4}", [f"first {c}", f"second {c}"][: 1 + c % 2])
                self.assertEqual(self.backend_of(body), self.backend_of(body, port=other.port))
        finally:
            other.stop()

    def test_a_hot_tenant_spreads_over_its_set_and_each_conversation_stays(self):
        system = "the one busy tenant " + "s" * 500
        # Enough requests of one tenant for the detector (min_count 8, window 400 ms).
        for i in range(40):
            self.backend_of(chat(system, [f"warm {i}"]))
        homes = {}

        def spread():
            for i in range(40):
                homes[i] = self.backend_of(chat(system, [f"spread {i}"]))
            return len(set(homes.values())) >= 3
        wait_until(spread, timeout=10, interval=0.2, what="a hot tenant spread over its set")
        for i in range(0, 40, 5):  # a conversation of the hot tenant keeps its home
            self.assertEqual(self.backend_of(chat(system, [f"spread {i}"])), homes[i])

    def test_bodies_arrive_byte_for_byte_and_fallbacks_are_counted(self):
        before = {s: self.keys(s) for s in ("encoding", "content_type", "invalid", "no_body")}
        gz = gzip.compress(chat("s", ["compressed"]))
        status, h, _ = self.post(gz, headers={"Content-Encoding": "gzip"})
        self.assertEqual((status, h.get("x-request-crc32")), (200, crc(gz)))
        text = b"not json at all"
        status, h, _ = self.post(text, headers={"Content-Type": "text/plain"})
        self.assertEqual((status, h.get("x-request-crc32")), (200, crc(text)))
        bad = b'{"messages": [{"role": "user", "content": "unterminated'
        status, h, _ = self.post(bad)
        self.assertEqual((status, h.get("x-request-crc32")), (200, crc(bad)))
        self.assertEqual(http_get(self.port, "/v1/models")[0], 200)
        for source in before:
            self.assertEqual(self.keys(source), before[source] + 1, source)

    def test_a_64_mib_body_streams_and_only_the_anchor_is_held(self):
        tail = "t" * (64 << 20)
        body = chat("short system", ["short question"],
                    extra={"messages": [{"role": "system", "content": "short system"},
                                        {"role": "user", "content": "short question"},
                                        {"role": "assistant", "content": tail}]})
        samples = scrape(self.rondel.admin_port)[1]
        n0 = metric_sum(samples, "rondel_llm_anchor_offset_bytes_count")
        s0 = metric_sum(samples, "rondel_llm_anchor_offset_bytes_sum")
        self.backend_of(body)
        samples = scrape(self.rondel.admin_port)[1]
        self.assertEqual(metric_sum(samples, "rondel_llm_anchor_offset_bytes_count"), n0 + 1)
        held = metric_sum(samples, "rondel_llm_anchor_offset_bytes_sum") - s0
        self.assertLessEqual(held, 8192, "bytes read before the decision")
        self.assertEqual(metric_sum(samples, "rondel_body_buffer_bytes"), 0)

    def test_api_route_explains_a_body_with_hashes_only(self):
        secret = "my very private prompt text"
        body = chat("system of tenant Z", [secret])
        home = self.backend_of(body)
        status, _, out = self.post(body, port=self.rondel.admin_port, path="/api/route?pool=p")
        self.assertEqual(status, 200)
        self.assertNotIn(secret.encode(), out)
        r = json.loads(out)
        address = next(b.address for b in self.backends if b.name == home)
        self.assertEqual((r["source"], r["form"], r["chosen"]), ("anchor", "chat", address))
        self.assertEqual(len(r["tenant"]), 16)
        path = os.path.join(self.dir, "access.log")
        wait_until(lambda: os.path.getsize(path) > 0, timeout=5, what="the access log")
        log = open(path, "rb").read()
        self.assertNotIn(secret.encode(), log)


TENANTS = [f"tenant {t} system prompt: you answer questions about topic {t}. " + "s" * 300
           for t in range(16)]


class LlmBalancedHomesTest(LlmClient, RondelTestCase):
    backend_names = tuple(f"b{i}" for i in range(8))
    backend_args = ("--checksum",)

    @classmethod
    def config(cls, homes="balanced"):
        # Rebuilds every 0.5 s; a tenant leaves after 4 s without a request, so none does while
        # the test runs.
        return make_config(cls.backends, pool={
            "hash_key": "llm_prefix", "algorithm": "rendezvous", "hot_keys": "{window: 2s}",
            "llm_prefix": f"{{tenant_homes: {homes}}}"})

    def homes(self, port=None):
        return {t: self.backend_of(chat(s, [f"probe {t}"]), port=port)
                for t, s in enumerate(TENANTS)}

    def settled_homes(self, port=None):
        """Each tenant's home once every tenant has joined: 2 tenants a backend."""
        found = {}

        def balanced():
            found.update(self.homes(port))
            return sorted(Counter(found.values()).values()) == [2] * 8
        wait_until(balanced, timeout=10, interval=0.2, what="2 tenants on each backend")
        return dict(found)

    def test_tenants_spread_two_a_backend_and_every_turn_stays(self):
        for t, s in enumerate(TENANTS):  # each tenant's first request makes it active
            self.backend_of(chat(s, [f"first {t}"]))
        homes = self.settled_homes()
        hashed = Rondel(self.config("hashed"))
        try:
            by_hash = Counter(self.homes(port=hashed.port).values())
            print(f"tenants a backend: balanced 2 each, hashed {sorted(by_hash.values())}")
        finally:
            hashed.stop()
        for t, s in enumerate(TENANTS):
            for c in range(3):
                questions = [f"tenant {t} conversation {c} turn {k}" for k in range(3)]
                seen = {self.backend_of(chat(s, questions[:k + 1])) for k in range(3)}
                self.assertEqual(seen, {homes[t]}, f"tenant {t} conversation {c}")

    def test_two_instances_that_saw_the_same_tenants_route_alike(self):
        other = Rondel(self.config())
        try:
            for t, s in enumerate(TENANTS):
                self.backend_of(chat(s, [f"first {t}"]))
                self.backend_of(chat(s, [f"first {t}"]), port=other.port)
            self.settled_homes()
            self.settled_homes(port=other.port)
            for i in range(48):
                body = chat(TENANTS[i % 16], [f"question {i}", f"follow-up {i}"][: 1 + i % 2])
                self.assertEqual(self.backend_of(body), self.backend_of(body, port=other.port))
        finally:
            other.stop()


if __name__ == "__main__":
    main()
