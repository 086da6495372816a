#!/usr/bin/env python3
"""Regenerates the measured tables of docs/algorithms.md by running rondel-sim.

Usage: tools/sim/figures.py PATH/TO/rondel-sim [static|replay|all|fleet|fleet-poll]
Prints Markdown tables, each preceded by the exact commands that produced it. `fleet` and
`fleet-poll` (not in `all`) print docs/routing.md's table of a fresh report's rounding
("Fleets: N"), without and with out-of-band polls every 0.25 service times.
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


def run_lines(sim, args):
    """Runs rondel-sim with args + --json; returns one parsed JSON object per output line."""
    cmd = [sim] + args + ["--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def fleet_tables(sim, poll):
    """Three instances told N (60/30/10 or even) against one exact balancer, 3 seeds a row:
    no reports, reports with `rounding: up`, reports with `rounding: random` (the default)."""
    base = ["--fleet", "--backends", "8", "--keys", "10000", "--zipf", "1.1", "--mean-service",
            "1", "--miss-delay", "0.2", "--cache-objects", "1000", "--requests", "400000",
            "--balance-factor", "125", "--report-age", "1", "--fleet-n", "0", "--min-reports",
            "4"] + (["--report-poll", "0.25"] if poll else [])
    print("Command (one per seed 1-3; K, S, SPLIT and ROUNDING vary; one balancer: "
          "`--fleet-split 1`):\n")
    print("```\nrondel-sim " + shlex.join(base) + " --clients K --slack S --fleet-split SPLIT "
          "--report-rounding ROUNDING --seed 1|2|3 --json\n```\n")
    print("| clients | slack | split | fleet | max/mean | max/cap (worst) | spill | misses (mean) |")
    print("|---|---|---|---|---|---|---|---|")

    def cell(rows):
        mm = [r["max_over_mean"] for r in rows]
        sp = [100 * r["spill"] for r in rows]
        mi = [100 * r["miss_rate"] for r in rows]
        return (f"{min(mm):.3f}-{max(mm):.3f} | {max(r['max_over_cap'] for r in rows):.3f} | "
                f"{min(sp):.1f}-{max(sp):.1f}% | {sum(mi) / len(mi):.1f}%")

    for clients in (20, 160):
        for slack in (0, 8):
            for split in ("34,33,33", "60,30,10"):
                rows = {"no reports": [], "reports, `rounding: up`": [],
                        "reports, `rounding: random`": [], "one balancer": []}
                for seed in (1, 2, 3):
                    common = base + ["--clients", str(clients), "--slack", str(slack),
                                     "--seed", str(seed)]
                    up = run_lines(sim, common + ["--fleet-split", split,
                                                  "--report-rounding", "up"])
                    rows["no reports"].append(up[0])
                    rows["reports, `rounding: up`"].append(up[1])
                    rows["reports, `rounding: random`"].append(
                        run_lines(sim, common + ["--fleet-split", split])[1])
                    rows["one balancer"].append(run_lines(sim, common + ["--fleet-split", "1"])[0])
                for name, r in rows.items():
                    print(f"| {clients} | {slack} | {split.replace(',', '/')} | {name} | "
                          f"{cell(r)} |")
    print()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    what = sys.argv[2] if len(sys.argv) > 2 else "all"
    if what in ("static", "all"):
        static_tables(sys.argv[1])
    if what in ("replay", "all"):
        replay_tables(sys.argv[1])
    if what in ("fleet", "fleet-poll"):
        fleet_tables(sys.argv[1], what == "fleet-poll")


if __name__ == "__main__":
    main()
