"""Integration-test harness: starts the real rondel binary and real test backends on 127.0.0.1.

Process handling, ports, the HTTP reader, the config writer, /proc readers and the metrics
parser come from the shared support package tools/pylib/rondel_support; this module binds them
to the binaries under test and to one process registry, and keeps the helpers that only the
integration tests use. Every process a test starts is registered and killed at exit (by pid,
never by name), and every wait is bounded in time. Binaries come from the environment that
tests/integration/CMakeLists.txt sets (RONDEL_BIN, RONDEL_TEST_BACKEND), or from ./build when run
by hand.
"""

import atexit
import json
import os
import re
import select
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest
from urllib.parse import quote

SOURCE_DIR = os.environ.get(
    "RONDEL_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
RONDEL_BIN = os.environ.get("RONDEL_BIN", os.path.join(SOURCE_DIR, "build/src/server/rondel"))
BACKEND_BIN = os.environ.get(
    "RONDEL_TEST_BACKEND", os.path.join(SOURCE_DIR, "build/tools/test_backend/rondel-test-backend"))

sys.path.insert(0, os.path.join(SOURCE_DIR, "tools", "pylib"))
from rondel_support import daemons, ports, procs  # noqa: E402
# Re-exported: the test files import these names from harness.
from rondel_support.config import make_config  # noqa: E402,F401
from rondel_support.daemons import SANITIZER_RX  # noqa: E402,F401
from rondel_support.httpio import (HttpConn, http_get, http_request, parse_responses,  # noqa: E402,F401
                                   raw_exchange)
from rondel_support.ledger import read_ledger  # noqa: E402,F401
from rondel_support.metrics import metric_sum, parse_metrics, scrape  # noqa: E402,F401
from rondel_support.procs import wait_until  # noqa: E402,F401

# Every process this test file starts (tests may add their own with _processes.append(proc)).
_processes = procs.ProcessRegistry()
atexit.register(_processes.kill_all)
# ctest (on its timeout) and scripts/test-repeat.sh (on its time budget) stop a test with
# SIGTERM: exit through atexit so the processes this test started are killed too.
procs.exit_on_sigterm()


class Backend(daemons.TestBackend):
    """One rondel-test-backend process named `name` on host:port (0: ephemeral). `args` are
    extra CLI flags (see its --help)."""

    def __init__(self, name, *args, host="127.0.0.1", port=0):
        super().__init__(name, *args, binary=BACKEND_BIN, registry=_processes, host=host,
                         port=port)


class BackendGroup(daemons.TestBackendGroup):
    """Several test backends served by one rondel-test-backend process and its one event loop
    (`--and`): when the machine is busy they are all descheduled together, so none falls
    behind the others by chance. `members` are (name, address) records usable in make_config;
    `args` are flags given to every member, member_args(name) a list of flags for one."""

    Member = daemons.Member

    def __init__(self, names, *args, member_args=lambda name: []):
        super().__init__(names, *args, binary=BACKEND_BIN, registry=_processes,
                         member_args=member_args)


class Rondel(daemons.Rondel):
    """The rondel daemon under test on a config text. Learns its ports from its own log lines."""

    def __init__(self, config_text, workdir=None, expect_start=True, args=(), prefix=()):
        super().__init__(config_text, binary=RONDEL_BIN, registry=_processes, workdir=workdir,
                         expect_start=expect_start, args=args, prefix=prefix)

    def settled_rss_kib(self, interval=0.2, timeout=3.0):
        """RSS (KiB) once it stops moving: two equal samples `interval` apart (bounded by
        `timeout`), so a measurement does not catch rondel still finishing a batch."""
        last = self.rss_kib()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(interval)
            now = self.rss_kib()
            if now == last:
                break
            last = now
        return last


class RondelTestCase(unittest.TestCase):
    """One rondel daemon and its backends, shared by the tests of a class.

    A class declares what to start; setUpClass starts the backends, then rondel, and
    tearDownClass stops rondel, then every backend, removes the temporary directory, and last
    asserts rondel's exit status (so a failed assertion leaves nothing running). Declare:
      backend_names   names of the Backend processes to start (cls.backends, in that order)
      backend_args    flags given to each of them (rondel-test-backend --help)
      start_backends() override for other backends (a BackendGroup, a ScriptedBackend, ...):
                      returns the list that cls.backends holds and tearDownClass stops
      config()        override for the config text (default: make_config(cls.backends)); may
                      use cls.dir and what start_backends() kept on cls
      rondel_args     flags for the daemon
      use_dir         cls.dir is a fresh temporary directory (logs, state files, rondel's
                      config file), removed at the end
      exit_status     the status tearDownClass asserts (None: not checked)
      idle_after_each tearDown waits until rondel has nothing in flight (rondel.wait_idle)
    Then cls.rondel is the daemon and cls.port its first listener's port.
    """

    backend_names = ()
    backend_args = ()
    rondel_args = ()
    use_dir = False
    exit_status = 0
    idle_after_each = False

    @classmethod
    def start_backends(cls):
        return [Backend(name, *cls.backend_args) for name in cls.backend_names]

    @classmethod
    def config(cls):
        return make_config(cls.backends)

    @classmethod
    def setUpClass(cls):
        cls.rondel, cls.backends = None, []
        cls.dir = tempfile.mkdtemp(prefix="rondel-test-") if cls.use_dir else None
        try:
            cls.backends = cls.start_backends()
            cls.rondel = Rondel(cls.config(), workdir=cls.dir, args=cls.rondel_args)
        except BaseException:
            cls.tearDownClass()  # unittest does not call it when setUpClass fails
            raise
        cls.port = cls.rondel.port

    @classmethod
    def tearDownClass(cls):
        code = None
        try:
            if cls.rondel is not None:
                code = cls.rondel.stop()
        finally:
            for b in cls.backends:
                b.stop()
            if cls.dir is not None:
                shutil.rmtree(cls.dir, ignore_errors=True)
        if cls.rondel is not None and cls.exit_status is not None:
            assert code == cls.exit_status, code

    def tearDown(self):
        if self.idle_after_each:
            self.rondel.wait_idle()


def main():
    unittest.main(verbosity=2)


def parse_kv(line):
    """{key: value} of a `key=value key=value` log line (values without spaces)."""
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))


def access_records(path, timeout=3.0, min_count=0):
    """Parsed access-log lines of `path`, waiting up to timeout for at least min_count of them."""
    deadline = time.monotonic() + timeout
    while True:
        recs = []
        if os.path.exists(path):
            with open(path) as f:
                # Only whole lines: a line rondel is still writing is not a record yet.
                recs = [parse_kv(l) for l in f if l.startswith("access ") and l.endswith("\n")]
        if len(recs) >= min_count or time.monotonic() > deadline:
            return recs
        time.sleep(0.05)


def timer_on_time(client_s, server_s, want_s):
    """None when a timeout fired within 10% or 250 ms (whichever is larger) of `want_s`, else
    what was wrong. The two sides are measured where no noise can make them fail by chance:
    not early, by the client's clock from before it sent the request (the server's timer starts
    later, so scheduling delays only lengthen this); not late, by rondel's own clock (the access
    log's duration_us), which leaves out how late the client thread was woken to read it."""
    tol = max(0.1 * want_s, 0.25)
    if client_s < want_s - tol:
        return f"answered {client_s:.3f}s after it was sent: before the {want_s}s timeout"
    if server_s > want_s + tol:
        return f"rondel took {server_s:.3f}s over it: later than the {want_s}s timeout"
    return None


def data_arrived_at(sock):
    """time.monotonic() when the kernel received the last data on TCP socket `sock`: now less
    TCP_INFO's tcpi_last_data_recv (a u32 of milliseconds at offset 52 of struct tcp_info). It
    dates a response by its arrival, however late the reading thread was woken, for a "not
    late" check that has no rondel-side duration to go by."""
    return _tcp_info_time(sock, 52)


def segment_arrived_at(sock):
    """time.monotonic() when the kernel received the last segment carrying an ACK on `sock`
    (tcpi_last_ack_recv, offset 56): a FIN's arrival, when the peer sent nothing after it. A
    reset does not move it."""
    return _tcp_info_time(sock, 56)


def _tcp_info_time(sock, offset):
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    now = time.monotonic()
    return now - struct.unpack_from("I", info, offset)[0] / 1000.0


def access_seconds(path, target, timeout=10.0):
    """rondel's own duration (duration_us, in seconds) of the one request to `target` in the
    access log at `path`, waiting up to `timeout` for its line (lines are written in batches)."""
    def find():
        recs = [x for x in access_records(path, timeout=0) if x.get("target") == target]
        return recs or None
    recs = wait_until(find, timeout=timeout, interval=0.05, what=f"the access line of {target}")
    if len(recs) != 1:
        raise AssertionError(f"{len(recs)} access lines for {target}")
    return int(recs[0]["duration_us"]) / 1e6


# Held for the life of this test process: their ports keep refusing connects.
_closed_ports = []


def unused_port():
    """A port on 127.0.0.1 where connects are refused, for the life of this test process
    (ports.closed_port, held here), for a backend address that must refuse connections."""
    held = ports.closed_port()
    _closed_ports.append(held)
    return held.port


class BlackholeListener:
    """A listening socket that never accepts, with its accept queue filled: further connects
    hang in SYN-SENT (the SYNs are dropped), which is how a connect timeout is provoked on
    127.0.0.1 only."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.fillers = []
        # Fill the accept queue (a backlog of 0 still admits one or two connections), then wait
        # until at least one filler's handshake completed: the queue is full from then on.
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            self.fillers.append(c)
        _, writable, _ = select.select([], self.fillers, [], 5.0)
        if not any(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 for c in writable):
            raise AssertionError("no connection to the blackhole listener completed")

    def close(self):
        for c in self.fillers:
            c.close()
        self.sock.close()


def zipf_keys(n_keys, s=1.1, seed=1):
    """A sampler of key indices 0..n_keys-1 with P(k) ~ 1/(k+1)^s (deterministic seed)."""
    import bisect
    import random
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) ** s for k in range(n_keys)]
    cum = []
    acc = 0.0
    for w in weights:
        acc += w
        cum.append(acc)

    def sample():
        return bisect.bisect_left(cum, rng.random() * acc)

    return sample


class ConnBackend:
    """A Python backend on `host` (127.0.0.1 unless given; any 127.0.0.0/8 address is local)
    and port 0 that hands each accepted connection to serve(sock) in a thread of its own and
    closes it afterwards (an OSError inside serve ends that connection quietly). Connections
    are counted in .connections."""

    def __init__(self, serve, timeout=10, host="127.0.0.1"):
        self.serve = serve
        self.timeout = timeout  # per socket operation of a connection
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.address = f"{host}:{self.port}"
        self.connections = 0
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._run, args=(c,), daemon=True).start()

    def _run(self, c):
        c.settimeout(self.timeout)
        try:
            self.serve(c)
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.stopped = True
        self.sock.close()


def read_head(c, buf=b"", chunk=65536):
    """Reads socket c until buf holds a whole HTTP head: (head, bytes after its empty line), or
    (None, what came) if the peer closed first."""
    while b"\r\n\r\n" not in buf:
        d = c.recv(chunk)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


class ScriptedBackend(ConnBackend):
    """A tiny Python backend for responses the C++ test backend cannot produce (close-delimited
    bodies, interim 1xx, malformed heads). handler(method, target, head_bytes, body) returns
    (bytes to send, close_after). Requests are read with Content-Length bodies only. Connections
    and requests are counted in .connections / .requests."""

    def __init__(self, handler, read_body=True):
        self.handler = handler
        self.read_body = read_body  # False: answer right after the head, leave the body unread
        self.requests = 0
        super().__init__(self._serve)

    def _serve(self, c):
        buf = b""
        while True:
            head, buf = read_head(c, buf)
            if head is None:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split()[:2]
            n = 0
            for l in lines[1:]:
                k, _, v = l.partition(":")
                if k.strip().lower() == "content-length":
                    n = int(v)
            if not self.read_body:
                n = 0
            while len(buf) < n:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            body, buf = buf[:n], buf[n:]
            self.requests += 1
            out, close = self.handler(method, target, head, body)
            if out:
                c.sendall(out)
            if not self.read_body and not close:
                # Hold the connection without reading anything more (the unread body fills
                # the socket buffers), until the peer gives up or 10 s pass.
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not self.stopped:
                    time.sleep(0.05)
                return
            if close:
                # Lingering close: half-close, then drain what the peer still sends, so
                # unread input does not turn the FIN into a reset that destroys the answer.
                c.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline and c.recv(65536):
                    pass
                return


class Prometheus:
    """A real Prometheus server on 127.0.0.1 (port 0, own temp storage) scraping `targets`
    ("host:port" of admin listeners) every `interval`. Killed at exit like every process here."""

    BIN = os.environ.get("PROMETHEUS_BIN", "prometheus")

    def __init__(self, targets, interval="1s"):
        self.dir = tempfile.mkdtemp(prefix="rondel-prom-")
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n"
                    f"  scrape_interval: {interval}\n"
                    f"  evaluation_interval: {interval}\n"
                    "scrape_configs:\n"
                    "  - job_name: rondel\n"
                    f"    scrape_interval: {interval}\n"
                    f"    scrape_timeout: {interval}\n"
                    "    static_configs:\n"
                    f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
        self.process = procs.Process(
            [self.BIN, f"--config.file={cfg}", f"--storage.tsdb.path={self.dir}/data",
             "--web.listen-address=127.0.0.1:0", "--log.level=info"], _processes)
        self.proc, self.out = self.process.proc, self.process.out
        [(_, self.port)] = ports.read_listening(self.out, ports.PROMETHEUS_LISTENING, timeout=20)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("prometheus exited:\n" + "\n".join(self.out.lines[-20:]))
            try:
                return http_get(self.port, "/-/ready", timeout=2)[0] == 200
            except OSError:
                return False
        wait_until(ready, timeout=20, interval=0.1, what="prometheus to be ready")

    def query(self, expr):
        """The `result` list of an instant query through the HTTP API (/api/v1/query)."""
        status, _, body = http_get(self.port, "/api/v1/query?query=" + quote(expr, safe=""))
        data = json.loads(body)
        if status != 200 or data.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {status} {body[:300]!r}")
        return data["data"]["result"]

    def stop(self):
        self.process.stop(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- Hardening helpers (test_limits_*, test_faults_*, test_memory_*). Additive only. ----------

def sanitized_build():
    """True when RONDEL_BIN is built with AddressSanitizer (-DRONDEL_SANITIZE=ON): memory and
    latency bounds are then looser (shadow memory, quarantine, instrumented code)."""
    try:
        with open(RONDEL_BIN, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


def raise_nofile(want):
    """Raises this process's soft RLIMIT_NOFILE to `want` (capped by the hard limit), so it and
    the processes it starts can hold that many descriptors. Returns the new soft limit."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        return new
    return soft


def percentile(values, p):
    """The p-th percentile (0..100, nearest rank) of `values`."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


class RssWatch:
    """Samples a process's VmRSS (`rss_kib`, a callable) every 20 ms in a thread from its
    creation until stop(), which returns the peak seen (KiB)."""

    def __init__(self, rss_kib):
        self.rss_kib = rss_kib
        self.peak = rss_kib()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.rss_kib())

    def stop(self):
        self._stop.set()
        self._t.join(timeout=2)
        return self.peak
