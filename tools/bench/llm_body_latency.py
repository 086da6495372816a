#!/usr/bin/env python3
"""Added latency of reading 220 KB prompts for their key (issue 35's 5 ms p99 target), at a fixed
offered load below saturation, rondel and the backends side by side in one run.

    tools/bench/llm_body_latency.py [--build-dir build-bench] [--conns 200] [--delay-ms 400]
                                    [--duration 10] [--rounds 3] [--backend-delay-ms 0]

Four rondel-test-backends in one process; rondel in front with `hash_key: llm_prefix`. wrk sends
chat bodies of 220 KB (a 2 KB system message, a 218 KB first user message, so the whole body is
read before the decision; a new conversation each request) over --conns connections, each waiting
a random 0..2 x --delay-ms after every response (wrk's delay(): about conns / delay requests a
second, the same for both targets; random so that the connections do not send in bursts). Rounds alternate: rondel, then the same load straight to one backend. Reports
p50/p99 per target, rondel's CPU per request, and the p99 difference. 127.0.0.1 only; every
process started here is stopped by pid."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "pylib")]

from rondel_support import config, daemons, procfs  # noqa: E402
from rondel_support.procs import ProcessRegistry  # noqa: E402

LUA = r"""
local counter = 0
local sys = string.rep("s", 2000)
local user = string.rep("u", 218000)
local conns = {}
setup = function(thread) thread:set("id", counter); counter = counter + 1 end
init = function(args) n = 0 end
-- A random wait (mean RT_DELAY_MS): a fixed one would send every connection's request at once,
-- in bursts of --conns x 220 KB whose own queueing would swamp what is measured.
delay = function()
  local d = tonumber(os.getenv("RT_DELAY_MS"))
  if d == 0 then return 0 end
  return math.random(0, 2 * d)
end
request = function()
  n = n + 1
  local body = '{"model":"m","messages":[{"role":"system","content":"' .. sys ..
    '"},{"role":"user","content":"' .. id .. "-" .. n .. user .. '"}]}'
  return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json"}, body)
end
"""


def parse_wrk(out):
    def dur(v, unit):
        return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[unit]
    lat = {}
    for pct in ("50", "90", "99"):
        m = re.search(rf"^\s+{pct}(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        lat[pct] = dur(*m.groups()) if m else float("nan")
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = sum(int(x) for x in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    return {"p50": lat["50"], "p90": lat["90"], "p99": lat["99"], "requests": reqs, "rps": rps,
            "errors": errors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "..", "build-bench"))
    ap.add_argument("--conns", type=int, default=200)
    ap.add_argument("--delay-ms", type=int, default=400)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    # The backends hold each response this long: with --delay-ms 0 the connections are then
    # --conns requests in flight at once, as in front of inference servers, without saturating.
    ap.add_argument("--backend-delay-ms", type=int, default=0)
    a = ap.parse_args()
    rondel_bin = os.path.join(a.build_dir, "src/server/rondel")
    backend_bin = os.path.join(a.build_dir, "tools/test_backend/rondel-test-backend")
    reg = ProcessRegistry()
    work = tempfile.mkdtemp(prefix="rondel-llm-latency-")
    lua = os.path.join(work, "chat.lua")
    with open(lua, "w") as f:
        f.write(LUA)
    try:
        group = daemons.TestBackendGroup([f"b{i}" for i in range(4)], binary=backend_bin,
                                         registry=reg,
                                         member_args=lambda name: ["--delay-ms",
                                                                   str(a.backend_delay_ms)])
        text = config.make_config([{"address": addr} for addr in group.addresses],
                                  pool={"hash_key": "llm_prefix"})
        rondel = daemons.Rondel(text, binary=rondel_bin, registry=reg, workdir=work)
        env = dict(os.environ, RT_DELAY_MS=str(a.delay_ms))
        rows = {"rondel": [], "direct": []}
        print(f"load {time.strftime('%H:%M:%S')} {procfs.loadavg()}")
        for rnd in range(a.rounds):
            for target, port in (("rondel", rondel.port), ("direct", group.ports[0])):
                t0 = procfs.cpu_ticks([rondel.pid])
                out = subprocess.run(["wrk", "-t2", f"-c{a.conns}", f"-d{a.duration}s", "--latency",
                                      "-s", lua, f"http://127.0.0.1:{port}/"], env=env,
                                     capture_output=True, text=True, timeout=a.duration + 60).stdout
                r = parse_wrk(out)
                ticks = procfs.cpu_ticks([rondel.pid]) - t0
                if target == "rondel" and r["requests"]:
                    r["cpu_ms_per_req"] = ticks * 1000.0 / os.sysconf("SC_CLK_TCK") / r["requests"]
                rows[target].append(r)
                print(f"round {rnd + 1} {target:6} {r['rps']:8.0f} req/s p50 {r['p50']:.2f} "
                      f"p90 {r['p90']:.2f} p99 {r['p99']:.2f} ms errors {r['errors']}"
                      + (f" rondel CPU {r['cpu_ms_per_req']:.3f} ms/req" if "cpu_ms_per_req" in r
                         else ""), flush=True)
        print(f"load {time.strftime('%H:%M:%S')} {procfs.loadavg()}")
        for rnd in range(a.rounds):
            d = rows["rondel"][rnd]["p99"] - rows["direct"][rnd]["p99"]
            print(f"round {rnd + 1}: p99 added by rondel {d:+.2f} ms")
    finally:
        reg.stop_all()


if __name__ == "__main__":
    main()
