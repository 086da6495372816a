#!/usr/bin/env python3
"""Side-by-side benchmark: rondel vs HAProxy vs nginx vs no proxy (see docs/benchmarks.md).

Started by tools/bench/run.sh, which installs the tools and builds rondel first. Everything
listens on 127.0.0.1; every process this script starts is stopped by pid at the end. The passes
live in tools/bench/rondel_bench/ (one module each); processes, ports, /proc readers, the HTTP
reader and the rondel config writer in tools/pylib/rondel_support/.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "pylib")]

from rondel_bench.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
