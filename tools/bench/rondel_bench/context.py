"""The context of one benchmark run: its options, where binaries and files are, how commands are
placed (cores, nice, scheduling policy) and the processes it started. Passed down to every pass
instead of module globals."""

import dataclasses
import os
import sys

from rondel_support.procs import ProcessRegistry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BENCH_DIR = os.path.join(ROOT, "tools", "bench")
LUA = os.path.join(BENCH_DIR, "load.lua")
PROXY_CORE = "0"   # the proxy under test
CLIENT_CORE = "1"  # wrk and the backends
SCHED_BATCH = ("chrt", "-b", "0")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


@dataclasses.dataclass
class Bench:
    """One run. opts: the parsed command line (see cli.py); workdir: configs, ledgers and each
    proxy's output; nice: prefix for every proxy, backend and wrk ("nice -n N" or none);
    client_sched: prefix for commands pinned to CLIENT_CORE only (SCHED_BATCH in the batch pass,
    never a proxy's); registry: every process started, stopped by pid at the end; port_to_name:
    "127.0.0.1:PORT" -> backend name, for rondel's backend ids."""

    opts: object = None
    workdir: str = ""
    rondel_bin: str = ""
    backend_bin: str = ""
    nice: tuple = ()
    client_sched: tuple = ()
    registry: ProcessRegistry = dataclasses.field(default_factory=ProcessRegistry)
    port_to_name: dict = dataclasses.field(default_factory=dict)

    def with_client_sched(self, prefix):
        """The same run (same registry and files) with `prefix` before client-core commands."""
        return dataclasses.replace(self, client_sched=tuple(prefix))

    def pin(self, core):
        """Command prefix that pins to `core` (a taskset CPU list); none when core is None
        (unpinned: the process may run on any core, as in the workers pass)."""
        if core is None:
            return []
        return (list(self.client_sched) if core == CLIENT_CORE else []) + ["taskset", "-c", core]

    def prefix(self, core):
        """nice, then pin(core): the prefix of every command the benchmark runs."""
        return list(self.nice) + self.pin(core)
