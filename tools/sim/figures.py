#!/usr/bin/env python3
"""Regenerates the measured tables of docs/algorithms.md by running rondel-sim.

Usage: tools/sim/figures.py PATH/TO/rondel-sim [static|replay|all]
Prints Markdown tables, each preceded by the exact commands that produced it.
"""
import json
import shlex
import subprocess
import sys


def run(sim, args):
    """Runs rondel-sim with args + --json and returns (command line, parsed JSON)."""
    cmd = [sim] + args + ["--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return "rondel-sim " + shlex.join(args + ["--json"]), json.loads(out)


def static_tables(sim):
    """Balance, churn, memory, build and lookup for every algorithm at N = 10, 100, 1000."""
    print("Command (one per row; N and ALGO vary):\n")
    print("```\nrondel-sim --algo ALGO --backends N --points 160 --keys 1000000 --json\n```\n")
    print("| N | algorithm | max/avg | min/avg | CV | ring CV theory | moved on add "
          "(ideal) | moved on remove (ideal) | stray moves | memory bytes | bytes/point | "
          "build ms | lookup ns/op |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (10, 100, 1000):
        for algo in ("ring", "rendezvous", "maglev", "jump"):
            _, r = run(sim, ["--algo", algo, "--backends", str(n), "--points", "160",
                             "--keys", "1000000"])
            b, add, rem = r["balance"], r["add"], r["remove"]
            theory = "" if b["cv_theory"] is None else "%.4f" % b["cv_theory"]
            stray = add["stray_share"] + rem["stray_share"]
            print("| %d | %s | %.3f | %.3f | %.4f | %s | %.5f (%.5f) | %.5f (%.5f) | %s | %s | "
                  "%s | %s | %.1f |" % (
                      n, algo, b["max_over_avg"], b["min_over_avg"], b["cv"], theory,
                      add["moved"], add["ideal"], rem["moved"], rem["ideal"],
                      "0" if stray == 0 else "%.5f" % (stray / 2),
                      r["memory_bytes"] if algo != "jump" else "0",
                      "%.2f" % r["bytes_per_point"] if r["points"] else "-",
                      "%.3f" % r["build_ms"] if algo != "jump" else "-",
                      r["lookup_ns"]))
            sys.stdout.flush()
    print()


def replay_tables(sim):
    """Bounded-load replay, ring N = 100, Zipf 1.1, for several c and both probe orders."""
    base = ["--algo", "ring", "--backends", "100", "--keys", "1000000", "--zipf", "1.1",
            "--replay", "--requests", "1000000", "--arrival-rate", "1000",
            "--mean-service", "1"]
    print("Command (one per row; C and PROBE vary; C = 0 is unbounded):\n")
    print("```\nrondel-sim " + shlex.join(base) +
          " --balance-factor C --probe PROBE --json\n```\n")
    print("| c | probe | max/avg in flight (mean at arrivals) | peak | max in_flight/cap | "
          "cap violations | spill share | mean hops | max hops | spill on successor | "
          "max/avg spill received |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for bf in (110, 125, 150, 200, 0):
        for probe in ("clockwise", "random"):
            if bf == 0 and probe == "random":
                continue
            _, r = run(sim, base + ["--balance-factor", str(bf), "--probe", probe])
            p = r["replay"]
            c = "%.2f" % (bf / 100) if bf else "unbounded"
            print("| %s | %s | %.3f | %.3f | %s | %s | %.4f | %.3f | %d | %.4f | %.3f |" % (
                c, probe if bf else "-", p["max_over_avg_in_flight_mean"],
                p["max_over_avg_in_flight_peak"],
                "%.4f" % p["max_in_flight_over_cap"] if bf else "-",
                p["cap_violations"] if bf else "-", p["spill_share"], p["mean_hops"],
                p["max_hops"], p["spill_to_successor"], p["spill_max_over_avg"]))
            sys.stdout.flush()
    print()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    what = sys.argv[2] if len(sys.argv) > 2 else "all"
    if what in ("static", "all"):
        static_tables(sys.argv[1])
    if what in ("replay", "all"):
        replay_tables(sys.argv[1])


if __name__ == "__main__":
    main()
