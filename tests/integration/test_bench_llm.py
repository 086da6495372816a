"""Smoke test of the inference-routing measuring stick (tools/kvsim, tools/bench/llm.sh): kvsim,
a small shared-context trace and the open-loop driver, straight to kvsim's oracle and through
rondel with `missing_key: random`. Repeated prefixes must hit, the oracle must beat random
routing on token-weighted hit rate, and kvsim's /stats must count what the driver saw."""

import json
import os
import unittest

import harness
from harness import http_request, make_config
from rondel_support import daemons, llm_driver, llm_traces

BUILD_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(harness.RONDEL_BIN))))
KVSIM_BIN = os.path.join(BUILD_DIR, "tools", "kvsim", "kvsim")
SPEEDUP = 50
SEED = 3
SERVERS = 4
# 8 tenants of 600-token contexts (38 blocks each, 304 in all): no server's 260 blocks hold all
# of them beside its conversations, two per server fit easily. Random routing must keep
# recomputing them; the oracle need not.
KV_BLOCKS = 260
SYSTEM_TOKENS = 600
CONTEXT_BLOCKS = (len("<|system|>\n") + 4 * SYSTEM_TOKENS) // 64  # full blocks of the context


def trace():
    return llm_traces.shared_contexts(SEED, [4], 40, tenants=8, users=2, turns=2,
                                      system_tokens=SYSTEM_TOKENS, query_tokens=120,
                                      output_tokens=20, think_seconds=4)


def kvsim_(*extra):
    return daemons.Kvsim(harness._processes, KVSIM_BIN, SERVERS, KV_BLOCKS, SPEEDUP, 7, extra)


def hit_rate(results):
    prompt = sum(r.prompt for r in results)
    return sum(r.cached for r in results) / prompt


class LlmBenchSmoke(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.path.exists(KVSIM_BIN), f"{KVSIM_BIN} is not built")
        self.records = trace()
        self.assertGreater(len(self.records), 100)

    def replay(self, targets):
        results, stats = llm_driver.run(self.records, targets, SPEEDUP, SEED, timeout=30)
        errors = [r.error for r in results if r.error]
        self.assertEqual(errors, [])
        self.assertTrue(all(r.ttft is not None and r.ttft <= r.e2e for r in results))
        self.assertTrue(all(r.output == 20 for r in results))
        return results

    def test_oracle_hits_repeated_prefixes_and_beats_random(self):
        kvsim = kvsim_()
        try:
            oracle = self.replay([("127.0.0.1", kvsim.oracle_port)])
            stats = kvsim.stats()
        finally:
            kvsim.stop()
        # kvsim counted exactly what the driver was told.
        self.assertEqual(stats["total"]["requests"], len(oracle))
        self.assertEqual(stats["total"]["cached_tokens"], sum(r.cached for r in oracle))
        self.assertEqual(stats["total"]["prompt_tokens"], sum(r.prompt for r in oracle))
        # A tenant's requests after its first find the tenant's context cached, second turns
        # their first turn too (90%: the oracle may send a request where it would start sooner
        # if a burst queues prefills on its home).
        seen = set()
        context_hits = later = 0
        for rec, r in zip(self.records, oracle):
            if rec["tenant"] in seen:
                later += 1
                context_hits += r.cached >= CONTEXT_BLOCKS * 16
            seen.add(rec["tenant"])
        self.assertGreaterEqual(context_hits, 0.9 * later, (context_hits, later))
        turn2 = [r for rec, r in zip(self.records, oracle) if rec["turn"] == 1]
        turn2_hits = sum(r.cached >= CONTEXT_BLOCKS * 16 + 16 for r in turn2)
        self.assertGreaterEqual(turn2_hits, 0.9 * len(turn2), (turn2_hits, len(turn2)))

        kvsim = kvsim_()
        rondel = harness.Rondel(make_config(
            [{"address": f"127.0.0.1:{p}", "id": f"s{i}"} for i, p in enumerate(kvsim.ports)],
            pool={"hash_key": "header:X-Kvsim-None", "missing_key": "random"}))
        try:
            rand = self.replay([("127.0.0.1", rondel.port)])
        finally:
            rondel.stop()
            kvsim.stop()
        h_oracle, h_random = hit_rate(oracle), hit_rate(rand)
        print(f"token-weighted hit rate: oracle {h_oracle:.3f}, random via rondel {h_random:.3f}")
        self.assertGreater(h_oracle, h_random + 0.15)

    def test_api_whole_answers_completions_and_errors(self):
        kvsim = kvsim_("--orca")
        port = kvsim.ports[1]
        try:
            text = "x" * 1000
            chat = json.dumps({"messages": [{"role": "user", "content": text}], "max_tokens": 5})
            first = http_request(port, "POST", "/v1/chat/completions", body=chat.encode())
            again = http_request(port, "POST", "/v1/chat/completions", body=chat.encode())
            comp = http_request(port, "POST", "/v1/completions",
                                body=json.dumps({"prompt": text}).encode())
            bad = http_request(port, "POST", "/v1/chat/completions", body=b"{not json")
            missing = http_request(port, "GET", "/v1/nothing")
        finally:
            kvsim.stop()
        self.assertEqual(first[0], 200)
        a, b = json.loads(first[2]), json.loads(again[2])
        rendered = len("<|user|>\n") + 1000 + len("\n<|assistant|>\n")
        self.assertEqual(a["usage"]["prompt_tokens"], -(-rendered // 4))
        self.assertEqual(a["usage"]["completion_tokens"], 5)
        self.assertEqual(len(a["choices"][0]["message"]["content"]), 5 * 4)
        self.assertEqual(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        self.assertEqual(b["usage"]["prompt_tokens_details"]["cached_tokens"], rendered // 64 * 16)
        self.assertRegex(first[1].get("endpoint-load-metrics", ""),
                         r"^TEXT named_metrics\.kv_cache_utilization=[0-9.]+,"
                         r"named_metrics\.num_requests_waiting=0$")
        c = json.loads(comp[2])
        self.assertEqual(c["object"], "text_completion")
        self.assertEqual(c["usage"]["prompt_tokens"], 250)
        self.assertEqual(c["usage"]["completion_tokens"], 16)  # --default-max-tokens
        self.assertEqual(bad[0], 400)
        self.assertIn("not JSON", json.loads(bad[2])["error"]["message"])
        self.assertEqual(missing[0], 404)


if __name__ == "__main__":
    harness.main()
