#!/usr/bin/env python3
"""Rewrites tests/test_costs.txt, the duration of every test that ctest gives as its COST (the
long tests start first under `ctest -j2`; see the top-level CMakeLists.txt), from the timings
ctest keeps in a build tree: BUILD/Testing/Temporary/CTestCostData.txt (its average per test over
the runs it has seen). `make test-costs [BUILD=build]` runs it after `make test`.

Usage: scripts/record-test-costs.py [BUILD_DIR]   (default build)"""
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = sys.argv[1] if len(sys.argv) > 1 else "build"
data = os.path.join(build, "Testing", "Temporary", "CTestCostData.txt")
if not os.path.exists(data):
    sys.exit(f"record-test-costs: no {data}: run the suite first (make test)")
costs = {}
with open(data) as f:
    for line in f:
        parts = line.split()
        if parts == ["---"]:
            break  # then the names of the tests that failed last
        if len(parts) == 3:
            costs[parts[0]] = float(parts[2])
out = os.path.join(root, "tests", "test_costs.txt")
with open(out, "w") as f:
    f.write("# Seconds each test took (scripts/record-test-costs.py, from a `make test` run):\n"
            "# ctest's COST, so that `ctest -j2` on a fresh clone starts the longest tests first.\n")
    for name, cost in sorted(costs.items(), key=lambda kv: (-kv[1], kv[0])):
        f.write(f"{name} {cost:.1f}\n")
print(f"record-test-costs: {len(costs)} tests from {data} -> {out}")
