#!/usr/bin/env python3
"""Replays a trace open-loop against one or more OpenAI-compatible endpoints and writes one JSON
line per request (ttft, e2e in real seconds; prompt, cached and output tokens; error), then a
summary line with the driver's own CPU time and its sending lag.

  tools/kvsim/drive.py TRACE.jsonl --target 127.0.0.1:8000 [--target ...] --speedup 10 > out.jsonl
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

from rondel_support import llm_driver, llm_traces  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--target", action="append", required=True, help="HOST:PORT (several: split by conversation)")
    ap.add_argument("--speedup", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1, help="seed of the synthesized prompt text")
    ap.add_argument("--timeout", type=float, default=120.0, help="real seconds per request")
    a = ap.parse_args()
    targets = [(t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])) for t in a.target]
    records = llm_traces.read_jsonl(a.trace)
    results, stats = llm_driver.run(records, targets, a.speedup, a.seed, a.timeout)
    import json
    for r in results:
        print(json.dumps(r.as_dict()))
    lags = sorted(r.lag for r in results)
    stats["requests"] = len(results)
    stats["errors"] = sum(1 for r in results if r.error)
    stats["lag_p99"] = lags[int(0.99 * (len(lags) - 1))] if lags else 0
    print(json.dumps({"summary": stats}))


if __name__ == "__main__":
    main()
