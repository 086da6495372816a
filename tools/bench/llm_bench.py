#!/usr/bin/env python3
"""Inference-routing benchmark: the same trace, the same kvsim seed, through each routing policy
in one run (docs/benchmarks.md, "Inference routing"). Started by tools/bench/llm.sh.

For each arrival rate it writes the trace (tools/kvsim/trace.py's generators), and for each
policy starts kvsim (fresh caches, same seed), the proxy, then the open-loop driver
(tools/kvsim/drive.py) as its own process; reads kvsim's /stats and the proxy's CPU time from
/proc; stops everything by pid. kvsim's cache size is chosen so that the trace's KV demand at
--rate73 is 73% of the total cache. Everything listens on 127.0.0.1.
"""
import argparse
import atexit
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "pylib")]

from rondel_bench import llm_policies, llm_report  # noqa: E402
from rondel_support import daemons, llm_traces, procfs  # noqa: E402
from rondel_support.procs import ProcessRegistry  # noqa: E402

DRIVE = os.path.join(ROOT, "tools", "kvsim", "drive.py")
TICKS = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"llm_bench: {msg}", file=sys.stderr, flush=True)


class Context:
    def __init__(self, args):
        self.workdir = tempfile.mkdtemp(prefix="rondel-llm-bench-")
        self.registry = ProcessRegistry()
        atexit.register(self.registry.kill_all)
        self.kvsim = os.path.join(args.build_dir, "tools", "kvsim", "kvsim")
        self.rondel = os.path.join(args.build_dir, "src", "server", "rondel")
        self.haproxy = args.haproxy


def make_trace(args, rate, path):
    gen = {"shared": lambda: llm_traces.shared_contexts(args.seed, [rate], args.duration),
           "qa": lambda: llm_traces.multi_round_qa(args.seed, [rate], args.duration),
           "mooncake": lambda: llm_traces.mooncake(args.seed, [rate], args.duration)}[args.trace]
    records = gen()
    with open(path, "w") as f:
        llm_traces.write_jsonl(records, f)
    return records


def drive(args, trace_path, targets, speedup=None):
    argv = [sys.executable, DRIVE, trace_path, "--speedup", str(speedup or args.speedup),
            "--seed", str(args.seed), "--timeout", str(args.timeout)]
    for h, p in targets:
        argv += ["--target", f"{h}:{p}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout * 4 + 600)
    if out.returncode != 0:
        raise RuntimeError(f"driver failed: {out.stderr[-2000:]}")
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return [x for x in lines if "summary" not in x], lines[-1]["summary"]


def run_point(ctx, args, start, trace_path, kv_blocks, name=""):
    kvsim = daemons.Kvsim(ctx.registry, ctx.kvsim, args.servers, kv_blocks, args.speedup, args.seed,
                          ("--orca",))
    started = None
    try:
        started = start(ctx, kvsim)
        cpu0 = procfs.cpu_ticks(started.pids) if started.pids else 0
        results, summary = drive(args, trace_path, started.targets)
        if args.requests_out:  # every request's figures, for a look at a run over time
            with open(f"{args.requests_out}-{name}-{args.seed}.json", "w") as f:
                json.dump(results, f)
        cpu = (procfs.cpu_ticks(started.pids) - cpu0) / TICKS if started.pids else None
        spill = started.spill_share()
        stats = kvsim.stats()
    finally:
        if started:
            started.stop()
        kvsim.stop()
    return llm_report.point_figures(results, summary, stats, args.speedup, spill, cpu or 0.0) \
        | ({"proxy_cpu_us": None} if cpu is None else {})


def driver_check(ctx, args, records, kv_blocks):
    """The driver alone at twice the highest rate (trace times halved), straight to kvsim's
    oracle: its CPU share and how late it sent."""
    fast = [dict(r) for r in records]
    for r in fast:
        if "t" in r:
            r["t"] = r["t"] / 2
        else:
            r["timestamp"] = r["timestamp"] // 2
    path = os.path.join(ctx.workdir, "driver_check.jsonl")
    with open(path, "w") as f:
        llm_traces.write_jsonl(fast, f)
    kvsim = daemons.Kvsim(ctx.registry, ctx.kvsim, args.servers, kv_blocks, args.speedup, args.seed,
                          ("--orca",))
    try:
        load = procfs.loadavg()
        results, summary = drive(args, path, [("127.0.0.1", kvsim.oracle_port)])
    finally:
        kvsim.stop()
    return {"rate_real": 2 * max(args.rates) * args.speedup, "requests": len(results),
            "cpu_s": summary["cpu"], "send_wall_s": summary["send_wall"],
            "cpu_share": summary["cpu"] / summary["wall"], "lag_p99_ms": summary["lag_p99"] * 1000,
            "lag_p50_ms": llm_report.percentile([r["lag"] for r in results], 0.5) * 1000,
            "loadavg": load,
            "errors": summary["errors"],
            "cpu_per_request_ms": summary["cpu"] / max(1, len(results)) * 1000}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--haproxy", default="/usr/sbin/haproxy")
    ap.add_argument("--trace", choices=["shared", "qa", "mooncake"], default="shared")
    ap.add_argument("--rates", default="2,4,6,8,10", help="requests per model second")
    ap.add_argument("--rate73", type=float, default=None,
                    help="the rate whose KV demand is 73%% of the cache (default: the middle rate)")
    ap.add_argument("--duration", type=float, default=240, help="model seconds of arrivals per rate")
    ap.add_argument("--speedup", type=float, default=10)
    ap.add_argument("--servers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kv-blocks", type=int, default=0, help="override the 73%% sizing")
    ap.add_argument("--policies", default="round_robin,least_in_flight,haproxy_json,oracle,"
                    "rondel_llm_1,rondel_llm_4")
    ap.add_argument("--timeout", type=float, default=300, help="real seconds per request")
    ap.add_argument("--out", default=None,
                    help="results path without extension (default tools/bench/results/llm-TRACE-DATE)")
    ap.add_argument("--svg", default=None, help="write the picture here")
    ap.add_argument("--requests-out", default=None,
                    help="also write each run's per-request figures to PREFIX-POLICY-RATE-SEED.json")
    ap.add_argument("--command", default=None, help="the command line to print in the report")
    ap.add_argument("--no-driver-check", action="store_true")
    ap.add_argument("--replot", metavar="RESULTS_JSON",
                    help="only redraw --svg from a results file of an earlier run")
    a = ap.parse_args()
    a.rates = [float(x) for x in a.rates.split(",")]
    if a.rate73 is None:
        a.rate73 = a.rates[len(a.rates) // 2]
    return a


def main():
    args = parse_args()
    if args.replot:
        with open(args.replot) as f:
            llm_report.svg_from_results(json.load(f), args.svg)
        return
    ctx = Context(args)
    traces, demand = {}, {}
    for rate in sorted(set(args.rates + [args.rate73])):
        path = os.path.join(ctx.workdir, f"trace-{rate:g}.jsonl")
        records = make_trace(args, rate, path)
        traces[rate] = (path, records)
        demand[rate] = llm_traces.kv_demand(records, 0.03)
    kv_blocks = args.kv_blocks or llm_traces.blocks_for_demand(demand[args.rate73], args.servers, 0.73)
    total_tokens = kv_blocks * args.servers * 16
    share = {r: d / total_tokens for r, d in demand.items()}
    log(f"kv_blocks {kv_blocks} per server; KV demand " +
        ", ".join(f"{r:g}/s {100 * s:.0f}%" for r, s in sorted(share.items())))
    check = None
    if not args.no_driver_check:
        check = driver_check(ctx, args, traces[max(args.rates)][1], kv_blocks)
        log(f"driver check: {check}")
    json_path = "$.messages[0].content" if args.trace == "mooncake" else "$.messages[1].content"
    wanted = args.policies.split(",")
    rows, skipped = [], {}
    for name, label, start, rondel_keys in llm_policies.policies(json_path, args.speedup):
        if name not in wanted:
            continue
        if rondel_keys is not None:
            why = llm_policies.rondel_rejects(ctx, rondel_keys)
            if why:
                skipped[name] = f"{label}: skipped, rondel rejects the config: {why}"
                log(skipped[name])
                continue
        for rate in args.rates:
            t0 = time.monotonic()
            f = run_point(ctx, args, start, traces[rate][0], kv_blocks, f"{name}-{rate:g}")
            log(f"{name} @ {rate:g}/s: hit {f['hit_rate']:.3f} ttft p90 {f['ttft_p90']:.2f} s "
                f"errors {f['errors']} ({time.monotonic() - t0:.0f} s)")
            rows.append((rate, label, name, f))
    report(args, ctx, rows, share, kv_blocks, check, skipped)


def report(args, ctx, rows, share, kv_blocks, check, skipped):
    command = args.command or " ".join(sys.argv)
    md = [f"`{command}`\n",
          f"trace {args.trace}, seed {args.seed}, {args.servers} kvsim servers of {kv_blocks} "
          f"blocks, speedup {args.speedup:g}, {args.duration:g} model seconds of arrivals per "
          f"rate; times in model seconds.\n",
          llm_report.table([(r, label, f) for r, label, _, f in rows], share)]
    md += [f"\n{why}" for why in skipped.values()]
    if check:
        md.append(f"\nDriver: {check['requests']} requests at {check['rate_real']:g}/s real "
                  f"(twice the highest rate): CPU {check['cpu_per_request_ms']:.2f} ms a request, "
                  f"{100 * check['cpu_share']:.0f}% of one core, send lag p50 "
                  f"{check['lag_p50_ms']:.1f} ms, p99 {check['lag_p99_ms']:.1f} ms, "
                  f"{check['errors']} errors; load average {check['loadavg']} at its start.")
    by = {}
    for rate, label, name, f in rows:
        by.setdefault(name, (label, {}))[1][rate] = f
    o = by.get("oracle", (None, {}))[1].get(args.rate73)
    rr = by.get("round_robin", (None, {}))[1].get(args.rate73)
    if o and rr:
        verdict = "well below" if o["ttft_p90"] * 2 < rr["ttft_p90"] else "NOT well below"
        md.append(f"\nAt {args.rate73:g}/s (73% KV demand): oracle TTFT p90 {o['ttft_p90']:.2f} s, "
                  f"round robin {rr['ttft_p90']:.2f} s: the oracle is {verdict} round robin.")
    text = "\n".join(md)
    print(text)
    stem = args.out or os.path.join(HERE, "results", time.strftime(f"llm-{args.trace}-%Y%m%d-%H%M%S"))
    stem = stem[:-5] if stem.endswith(".json") else stem
    with open(stem + ".md", "w") as f:
        f.write(text + "\n")
    with open(stem + ".json", "w") as f:
        json.dump({"command": command, "args": vars(args), "kv_blocks": kv_blocks,
                   "kv_demand_share": {str(k): v for k, v in share.items()},
                   "driver_check": check, "skipped": skipped,
                   "points": [{"rate": r, "policy": n, "label": label, **f}
                              for r, label, n, f in rows]}, f, indent=1, default=str)
    log(f"results in {stem}.json and .md")
    if args.svg:
        series = [(label, sorted((r, f["ttft_p90"]) for r, f in pts.items()))
                  for label, pts in by.values()]
        llm_report.svg(args.svg, f"TTFT p90, {args.trace} trace, {args.servers} kvsim servers",
                       series, args.rate73)
        log(f"picture in {args.svg}")
    ctx.registry.stop_all()


if __name__ == "__main__":
    main()
