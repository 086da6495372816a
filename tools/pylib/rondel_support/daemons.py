"""rondel, rondel-test-backend and kvsim as processes on 127.0.0.1: started on port 0, their ports read
back from their own log lines, registered in a procs.ProcessRegistry, stopped by pid."""

import json
import os
import re
from signal import SIGHUP, SIGTERM
import tempfile
from urllib.parse import quote

from . import config, ports, procfs
from .httpio import http_get
from .procs import Process, pause, wait_until

# A line that starts an AddressSanitizer / LeakSanitizer / UndefinedBehaviorSanitizer /
# ThreadSanitizer report.
SANITIZER_RX = re.compile(r"ERROR: AddressSanitizer|LeakSanitizer|runtime error:|WARNING: ThreadSanitizer")


class TestBackendProcess:
    """One rondel-test-backend process serving one backend or several (`--and` groups), each
    listening where its group's --listen says (default 127.0.0.1:0). `ports` / `addresses` are
    read from its "listening HOST:PORT" lines, one per group, in group order."""

    def __init__(self, binary, argv, registry, prefix=(), timeout=10.0):
        self.process = Process([*prefix, binary, *argv], registry)
        self.proc = self.process.proc
        self.out = self.process.out
        found = ports.read_listening(self.out, count=list(argv).count("--and") + 1,
                                     timeout=timeout)
        self.addresses = [f"{h}:{p}" for h, p in found]
        self.ports = [p for _, p in found]
        self.host, self.port = found[0]
        self.address = self.addresses[0]

    @property
    def pid(self):
        return self.proc.pid

    def stats(self, port=None):
        """The backend's /_stats counters (of the first backend, or of the one on `port`)."""
        return json.loads(http_get(port or self.port, "/_stats")[2])

    def reset(self, port=None):
        http_get(port or self.port, "/_reset")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop_process(self, timeout=5.0):
        """SIGSTOP, then waits until the kernel reports the process stopped: from then on it
        reads, answers and writes nothing (procs.pause)."""
        pause(self.proc, timeout)

    def stop(self, sig=SIGTERM, timeout=5.0):
        """Signal (SIGTERM), wait, kill after `timeout`; True when it exited by itself."""
        return self.process.stop(sig, timeout)

    def kill(self):
        self.process.kill()


class Member:
    """One backend of a TestBackendGroup: name, host, port, address ("host:port")."""

    def __init__(self, name, host, port):
        self.name, self.host, self.port = name, host, port
        self.address = f"{host}:{port}"


class TestBackendGroup(TestBackendProcess):
    """Several test backends (`names`) served by one rondel-test-backend process and its one
    event loop (`--and`), each on 127.0.0.1 port 0: on a busy machine they are descheduled
    together. `args` go to every member, member_args(name) to one; `members` are Member
    records (usable in config.make_config), in the order of `names`."""

    def __init__(self, names, *args, binary, registry, member_args=lambda name: [], prefix=()):
        argv = []
        for i, name in enumerate(names):
            argv += (["--and"] if i else []) + ["--listen", "127.0.0.1:0", "--name", name, *args,
                                                *member_args(name)]
        super().__init__(binary, argv, registry, prefix)
        self.names = list(names)
        self.members = [Member(n, h, p) for n, h, p in
                        zip(names, [a.rsplit(":", 1)[0] for a in self.addresses], self.ports)]


class TestBackend(TestBackendProcess):
    """One rondel-test-backend named `name` on host:port (0: ephemeral). `args` are extra CLI
    flags (see its --help), which may add `--and` groups."""

    def __init__(self, name, *args, binary, registry, host="127.0.0.1", port=0, prefix=()):
        self.name = name
        super().__init__(binary, ["--listen", f"{host}:{port}", "--name", name, *args],
                         registry, prefix)


class Rondel:
    """The rondel daemon on a config text (written to workdir/rondel.yaml). Learns its ports
    from its own log lines ("info listening", "info admin_listening": log level info)."""

    def __init__(self, config_text, *, binary, registry, workdir=None, expect_start=True,
                 args=(), prefix=(), start_timeout=10.0):
        # prefix: a command that runs rondel, e.g. ("prlimit", "--nofile=128", "--"); it must
        # exec rondel (same pid) for the pid-based helpers below to see rondel itself.
        self.dir = workdir or tempfile.mkdtemp(prefix="rondel-it-")
        self.config_path = config.write_file(os.path.join(self.dir, "rondel.yaml"), config_text)
        self.process = Process([*prefix, binary, "-f", self.config_path, *args], registry)
        self.proc = self.process.proc
        self.out = self.process.out
        self.ports = {}
        self.admin_port = None
        if expect_start:
            self.out.wait_for(r"\binfo started\b", timeout=start_timeout)
            self._learn_ports()

    def _learn_ports(self):
        found, admin = ports.rondel_ports(list(self.out.lines))
        self.ports.update(found)
        if admin is not None:
            self.admin_port = admin

    @property
    def port(self):
        """The port of the listener named "web", else of the first listener."""
        return self.ports.get("web") or next(iter(self.ports.values()))

    @property
    def pid(self):
        return self.proc.pid

    def write_config(self, text):
        config.write_file(self.config_path, text)

    def reload(self, text=None, expect_ok=True, timeout=10):
        """Writes `text` (if given), sends SIGHUP and waits for the reload's outcome line;
        returns True for reload_ok. expect_ok (unless None) is asserted."""
        if text is not None:
            self.write_config(text)
        start = self.out.count()
        self.proc.send_signal(SIGHUP)
        m = self.out.wait_for(r"\b(reload_ok|reload_failed)\b", timeout=timeout, start=start)
        ok = m.group(1) == "reload_ok"
        if expect_ok is not None and ok != expect_ok:
            raise AssertionError("reload outcome " + m.group(1) + ":\n" +
                                 "\n".join(self.out.lines[start:]))
        self._learn_ports()
        return ok

    def pools(self):
        """/api/pools as a dict."""
        return json.loads(http_get(self.admin_port, "/api/pools")[2])

    def route(self, pool, key):
        """/api/route for `key` in `pool` as a dict."""
        return json.loads(
            http_get(self.admin_port, f"/api/route?pool={quote(pool)}&key={quote(key, safe='')}")[2])

    def in_flight(self):
        """Total in-flight count over every pool and backend, per the admin API."""
        total = 0
        for p in self.pools()["pools"]:
            total += p["total_in_flight"]
            total += sum(b["in_flight"] for b in p["backends"])
        return total

    def requests_in_flight(self):
        """Requests in flight over every pool (each counted once), per the admin API."""
        return sum(p["total_in_flight"] for p in self.pools()["pools"])

    def wait_idle(self, timeout=10):
        wait_until(lambda: self.in_flight() == 0, timeout=timeout, what="in-flight counts to be 0")

    def lines(self, pattern=None):
        """Output lines so far, all or those matching `pattern` (all of them once it exited)."""
        return self.process.lines(pattern)

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit code. Raises AssertionError when rondel does not
        exit in time (it is killed) or its output holds a sanitizer report (ASan, LeakSanitizer
        at exit, UBSan, TSan): see sanitizer_reports()."""
        if not self.process.stop(SIGTERM, timeout):
            raise AssertionError("rondel did not exit within %ss of SIGTERM" % timeout)
        reports = self.sanitizer_reports()
        if reports:
            raise AssertionError("sanitizer report in rondel's output:\n" +
                                 "\n".join(self.out.lines[reports[0]:reports[0] + 60]))
        return self.proc.returncode

    def sanitizer_reports(self):
        """Indices of the output lines that start a sanitizer report. After the process exited,
        waits (bounded) until its output is read to the end, so LeakSanitizer's report at exit
        is included. Empty in a build without sanitizers."""
        if self.proc.poll() is not None:
            self.out.join(timeout=10)
        return [i for i, line in enumerate(list(self.out.lines)) if SANITIZER_RX.search(line)]

    def rss_kib(self):
        return procfs.rss_kib([self.pid])

    def cpu_seconds(self):
        """User + system CPU time rondel has used so far (from /proc/PID/stat)."""
        return procfs.cpu_seconds(self.pid)

    def open_fds(self):
        """Number of file descriptors rondel has open."""
        return procfs.open_fds([self.pid])


class Kvsim:
    """tools/kvsim: `servers` simulated inference servers and an oracle on ephemeral ports
    (their ports read back from its output)."""

    def __init__(self, registry, binary, servers, kv_blocks, speedup, seed, extra=()):
        argv = [binary, "--servers", str(servers), "--port", "0", "--oracle",
                "--kv-blocks", str(kv_blocks), "--speedup", str(speedup), "--seed", str(seed),
                *extra]
        self.process = Process(argv, registry)
        self.process.wait_for(r"^ready$", timeout=10)
        self.ports = [int(x) for x in
                      (re.match(r"listening \S+:(\d+)$", line).group(1)
                       for line in self.process.lines(r"^listening "))]
        self.oracle_port = int(self.process.lines(r"^oracle ")[0].rsplit(":", 1)[1])

    def stats(self):
        return json.loads(http_get(self.ports[0], "/stats", timeout=10)[2])

    def stop(self):
        self.process.stop()
