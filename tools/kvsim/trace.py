#!/usr/bin/env python3
"""Writes an LLM request trace (JSONL) for kvsim's load driver, deterministic from --seed.

  tools/kvsim/trace.py shared   --rates 2,4,8 --stage 120 [--tenants 16 --users 8 --turns 3] > t.jsonl
  tools/kvsim/trace.py qa       --rates 4 --stage 300 > qa.jsonl
  tools/kvsim/trace.py mooncake --rates 4 --stage 300 > mc.jsonl
  tools/kvsim/trace.py demand t.jsonl [--decode 0.03]     # KV demand in tokens (time-averaged)

Rates are requests per model second; each is held --stage model seconds (several: a ramp).
Shapes and record formats: tools/pylib/rondel_support/llm_traces.py.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from rondel_support import llm_traces  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["shared", "qa", "mooncake", "demand"])
    ap.add_argument("path", nargs="?", help="demand: the trace to read")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rates", default="4", help="requests per model second, comma-separated")
    ap.add_argument("--stage", type=float, default=300, help="model seconds per rate")
    ap.add_argument("--tenants", type=int, default=16)
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--system-tokens", type=int, default=6000)
    ap.add_argument("--query-tokens", type=int, default=1200)
    ap.add_argument("--output-tokens", type=int, default=200)
    ap.add_argument("--think", type=float, default=10.0)
    ap.add_argument("--decode", type=float, default=0.03, help="demand: seconds per output token")
    a = ap.parse_args()
    rates = [float(x) for x in a.rates.split(",")]
    if a.kind == "demand":
        records = llm_traces.read_jsonl(a.path)
        print(round(llm_traces.kv_demand(records, a.decode)))
        return
    if a.kind == "shared":
        records = llm_traces.shared_contexts(a.seed, rates, a.stage, a.tenants, a.users, a.turns,
                                             a.system_tokens, a.query_tokens, a.output_tokens,
                                             a.think)
    elif a.kind == "qa":
        records = llm_traces.multi_round_qa(a.seed, rates, a.stage)
    else:
        records = llm_traces.mooncake(a.seed, rates, a.stage)
    llm_traces.write_jsonl(records, sys.stdout)


if __name__ == "__main__":
    main()
