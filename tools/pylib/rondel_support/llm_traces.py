"""Traces of LLM requests for kvsim (tools/kvsim, docs/benchmarks.md "Inference routing"):
generators deterministic from a seed, the prompt text each record stands for, and the KV demand a
trace puts on a cache.

A trace is JSONL, one request a line, sorted by time. Two record forms:
- chat: {"t": model seconds, "conv": id, "turn": k, "max_tokens": n,
         "messages": [{"role": r, "text": text id, "tokens": n}, ...]}
  The text of a message is synthesized from (seed, text id): the same id is the same text, so a
  later turn repeats its conversation's earlier messages byte for byte.
- Mooncake (kvcache-ai/Mooncake's trace format): {"timestamp": ms, "input_length": n,
  "output_length": n, "hash_ids": [...]}; each hash id stands for 512 tokens of text synthesized
  from (seed, id), so records sharing leading ids share a prompt prefix.
"""
import hashlib
import json
import math
import random

BYTES_PER_TOKEN = 4          # kvsim's rule (prompt.h)
MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's hash_ids are 512-token blocks
_VOCAB = None


def _vocab():
    global _VOCAB  # noqa: PLW0603 - a constant table built once
    if _VOCAB is None:
        letters = "abcdefghijklmnopqrstuvwxyz"
        rng = random.Random(1)
        _VOCAB = [" " + "".join(rng.choice(letters) for _ in range(3)) for _ in range(4096)]
    return _VOCAB


class TextBank:
    """Text for ids: `tokens` tokens of 4 bytes each, the same for the same (seed, id). Keeps
    what it made (a trace reuses its texts)."""

    def __init__(self, seed):
        self.seed = seed
        self._texts = {}

    def text(self, text_id, tokens):
        key = (text_id, tokens)
        t = self._texts.get(key)
        if t is None:
            digest = hashlib.blake2b(f"{self.seed}/{text_id}".encode(), digest_size=8).digest()
            rng = random.Random(int.from_bytes(digest, "little"))
            t = "".join(rng.choices(_vocab(), k=tokens))
            self._texts[key] = t
        return t

    def forget(self, text_id, tokens):
        self._texts.pop((text_id, tokens), None)


def is_mooncake(rec):
    return "hash_ids" in rec


def record_time(rec):
    """A record's arrival in model seconds."""
    return rec["timestamp"] / 1000.0 if is_mooncake(rec) else rec["t"]


def record_output(rec):
    return rec["output_length"] if is_mooncake(rec) else rec["max_tokens"]


def messages_of(rec, bank):
    """The chat messages a record stands for, with their text."""
    if not is_mooncake(rec):
        return [{"role": m["role"], "content": bank.text(m["text"], m["tokens"])}
                for m in rec["messages"]]
    ids = rec["hash_ids"]
    parts = []
    left = rec["input_length"]
    for i, h in enumerate(ids):
        n = MOONCAKE_BLOCK_TOKENS if i + 1 < len(ids) else max(1, left)
        parts.append(bank.text(f"mc{h}", MOONCAKE_BLOCK_TOKENS)[:n * BYTES_PER_TOKEN])
        left -= MOONCAKE_BLOCK_TOKENS
    return [{"role": "user", "content": "".join(parts)}]


def segments_of(rec):
    """[(segment key, tokens)]: the pieces of a record's prompt that other records can share
    (a message, a Mooncake block), keyed by their position in the prompt's prefix."""
    if is_mooncake(rec):
        return [(("mc",) + tuple(rec["hash_ids"][:i + 1]), MOONCAKE_BLOCK_TOKENS)
                for i in range(len(rec["hash_ids"]))]
    out = []
    path = ()
    for m in rec["messages"]:
        path = path + (m["text"],)
        out.append((path, m["tokens"] + 3))  # + the role marker's few tokens
    return out


def write_jsonl(records, out):
    for r in records:
        out.write(json.dumps(r, separators=(",", ":")) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _rate_at(stages, t):
    """stages: [(until model second, rate)]; the rate at t (0 past the end)."""
    for until, rate in stages:
        if t < until:
            return rate
    return 0.0


def _poisson_times(rng, stages):
    """Arrival times of a Poisson process whose rate is piecewise constant over stages."""
    t = 0.0
    start = 0.0
    for until, rate in stages:
        t = max(t, start)
        while rate > 0:
            t += rng.expovariate(rate)
            if t >= until:
                break
            yield t
        start = until


def stages_of(rates, stage_seconds):
    """[(until, rate)] for a list of rates, each held for stage_seconds."""
    return [((i + 1) * stage_seconds, r) for i, r in enumerate(rates)]


def shared_contexts(seed, rates, stage_seconds, tenants=16, users=8, turns=3,
                    system_tokens=6000, query_tokens=1200, output_tokens=200, think_seconds=10.0):
    """The llm-d benchmark's shape: `tenants` long system contexts (system_tokens each), `users`
    users each; a conversation of `turns` turns (each turn carries the previous questions and
    answers) starts at Poisson times so that requests arrive at `rates` per second (conversation
    rate = rate / turns), each stage held stage_seconds (a ramp when the rates grow). Turn k+1
    comes think_seconds after turn k would end unloaded (decode of output_tokens not counted)."""
    rng = random.Random(seed)
    conv_stages = [(until, rate / turns) for until, rate in stages_of(rates, stage_seconds)]
    records = []
    for n, start in enumerate(_poisson_times(rng, conv_stages)):
        tenant = rng.randrange(tenants)
        user = rng.randrange(users)
        conv = f"c{n}"
        msgs = [{"role": "system", "text": f"tenant{tenant}", "tokens": system_tokens}]
        t = start
        for k in range(turns):
            msgs = msgs + [{"role": "user", "text": f"t{tenant}u{user}{conv}q{k}",
                            "tokens": query_tokens}]
            records.append({"t": round(t, 4), "conv": conv, "turn": k, "tenant": tenant,
                            "max_tokens": output_tokens, "messages": msgs})
            msgs = msgs + [{"role": "assistant", "text": f"{conv}a{k}", "tokens": output_tokens}]
            t += think_seconds + rng.expovariate(1.0 / think_seconds) * 0.2
    records.sort(key=lambda r: r["t"])
    return records


def multi_round_qa(seed, rates, stage_seconds, rounds=8, system_tokens=1000,
                   history_tokens=2000, question_tokens=60, output_tokens=100, gap_seconds=5.0):
    """vLLM production-stack's multi-round QA shape: one shared system prompt, users each with a
    long history of their own (history_tokens), short questions and answers, many rounds. Users
    join at Poisson times (rate / rounds a second, so requests arrive at `rate`); a user's rounds
    are gap_seconds apart on average."""
    rng = random.Random(seed)
    records = []
    user_stages = [(until, rate / rounds) for until, rate in stages_of(rates, stage_seconds)]
    for n, start in enumerate(_poisson_times(rng, user_stages)):
        gap = gap_seconds
        conv = f"u{n}"
        msgs = [{"role": "system", "text": "shared-system", "tokens": system_tokens},
                {"role": "user", "text": f"{conv}history", "tokens": history_tokens}]
        msgs.append({"role": "assistant", "text": f"{conv}ack", "tokens": 20})
        t = start
        for k in range(rounds):
            msgs = msgs + [{"role": "user", "text": f"{conv}q{k}", "tokens": question_tokens}]
            records.append({"t": round(t, 4), "conv": conv, "turn": k, "max_tokens": output_tokens,
                            "messages": msgs})
            msgs = msgs + [{"role": "assistant", "text": f"{conv}a{k}", "tokens": output_tokens}]
            t += gap * (0.5 + rng.random())
    records.sort(key=lambda r: r["t"])
    return records


def mooncake(seed, rates, stage_seconds, prefixes=20, prefix_blocks=4, follow_share=0.5,
             new_blocks=(1, 8), output_mean=250):
    """Mooncake-style records: each request's hash_ids start with one of `prefixes` shared
    prefixes (prefix_blocks blocks of 512 tokens), then either continue an earlier request's ids
    (share follow_share: a conversation going on) or take fresh ids; input_length ends inside the
    last block; output lengths exponential around output_mean; Poisson timestamps in ms."""
    rng = random.Random(seed)
    next_id = prefixes * prefix_blocks
    sessions = []
    records = []
    for t in _poisson_times(rng, stages_of(rates, stage_seconds)):
        if sessions and rng.random() < follow_share:
            base = rng.choice(sessions[-200:])
        else:
            p = rng.randrange(prefixes)
            base = list(range(p * prefix_blocks, (p + 1) * prefix_blocks))
        k = rng.randint(*new_blocks)
        ids = base + list(range(next_id, next_id + k))
        next_id += k
        sessions.append(ids)
        length = (len(ids) - 1) * MOONCAKE_BLOCK_TOKENS + rng.randint(1, MOONCAKE_BLOCK_TOKENS)
        records.append({"timestamp": int(t * 1000), "input_length": length,
                        "output_length": max(1, int(rng.expovariate(1.0 / output_mean))),
                        "hash_ids": ids})
    return records


def kv_demand(records, decode_seconds, skip=0.25, samples=400):
    """Time-averaged KV demand of a trace, in tokens: at time t, every prompt segment (message,
    Mooncake block) from its first to its last use (what a cache must keep to hit every reuse),
    the segments of requests still decoding (arrival + decode_seconds x output), and their
    output tokens. Averaged over `samples` instants between the first `skip` and the last `skip`
    of the trace. The denominator of "KV demand = x% of the cache"."""
    spans = {}
    outputs = []
    for r in records:
        t0 = record_time(r)
        t1 = t0 + decode_seconds * record_output(r)
        for key, tokens in segments_of(r):
            s = spans.get(key)
            spans[key] = (t0 if s is None else min(s[0], t0), t1 if s is None else max(s[1], t1),
                          tokens)
        outputs.append((t0, t1, record_output(r)))
    if not records:
        return 0.0
    start = record_time(records[0])
    end = record_time(records[-1])
    lo, hi = start + (end - start) * skip, end - (end - start) * skip
    points = [lo + (hi - lo) * i / max(1, samples - 1) for i in range(samples)]
    events = []
    for a, b, tokens in list(spans.values()) + outputs:
        events.append((a, tokens))
        events.append((b, -tokens))
    events.sort()
    total, level, i = 0.0, 0, 0
    for p in points:
        while i < len(events) and events[i][0] <= p:
            level += events[i][1]
            i += 1
        total += level
    return total / len(points)


def prompt_tokens(rec):
    """About the prompt tokens kvsim counts for a record (role markers included)."""
    return sum(t for _, t in segments_of(rec))


def blocks_for_demand(demand_tokens, servers, share):
    """KV blocks of 16 tokens per server so that demand_tokens is `share` of the total cache."""
    return int(math.ceil(demand_tokens / (share * servers * 16)))
