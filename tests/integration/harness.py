"""Integration-test harness: starts the real rondel binary and real test backends on 127.0.0.1.

Every process a test starts is registered and killed at exit (by pid, never by name), and every
wait is bounded in time. Binaries come from the environment that tests/integration/CMakeLists.txt
sets (RONDEL_BIN, RONDEL_TEST_BACKEND), or from ./build when run by hand.
"""

import atexit
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

SOURCE_DIR = os.environ.get(
    "RONDEL_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
RONDEL_BIN = os.environ.get("RONDEL_BIN", os.path.join(SOURCE_DIR, "build/src/server/rondel"))
BACKEND_BIN = os.environ.get(
    "RONDEL_TEST_BACKEND", os.path.join(SOURCE_DIR, "build/tools/test_backend/rondel-test-backend"))

_processes = []

# A line that starts an AddressSanitizer / LeakSanitizer / UndefinedBehaviorSanitizer report.
SANITIZER_RX = re.compile(r"ERROR: AddressSanitizer|LeakSanitizer|runtime error:")


def _cleanup():
    for p in _processes:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except Exception:
                pass


atexit.register(_cleanup)


def _terminated(signum, frame):
    # ctest (on its timeout) and scripts/test-repeat.sh (on its time budget) stop a test with
    # SIGTERM: exit through atexit so the processes this test started are killed too.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminated)


def wait_until(predicate, timeout=10.0, interval=0.02, what="condition"):
    """Polls predicate() until it returns a truthy value; raises AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class _LineReader:
    """Collects a process's output lines in a thread so its pipe never fills."""

    def __init__(self, stream):
        self.lines = []
        self.ended = False  # the stream reached its end: no line will be added
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()
        with self._cv:
            self.ended = True
            self._cv.notify_all()

    def wait_for(self, pattern, timeout=10.0, start=0):
        """Returns the first match of regex `pattern` in lines[start:], waiting up to timeout.
        Fails at once when the stream ended (the process exited) without such a line."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cv:
            i = start
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return m
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.ended:
                    why = "before the output ended" if self.ended else f"within {timeout}s"
                    raise AssertionError(
                        f"no line matching {pattern!r} {why}; last lines:\n" +
                        "\n".join(self.lines[-20:]))
                self._cv.wait(left)

    def count(self):
        with self._cv:
            return len(self.lines)

    def join(self, timeout=5.0):
        """Waits for the end of the stream: once the process has exited, its last lines may
        still be in the pipe when wait() returns. Raises AssertionError when the stream has not
        ended within `timeout` (something else still holds the pipe open), so that no caller
        matches output that was not read to the end."""
        self._thread.join(timeout)
        if not self.ended:
            raise AssertionError(f"the output did not end within {timeout}s of the exit")


class Backend:
    """One rondel-test-backend process. `args` are extra CLI flags (see its --help)."""

    def __init__(self, name, *args, host="127.0.0.1", port=0):
        self.name = name
        self.proc = subprocess.Popen(
            [BACKEND_BIN, "--listen", f"{host}:{port}", "--name", name, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _processes.append(self.proc)
        self.out = _LineReader(self.proc.stdout)
        m = self.out.wait_for(r"listening (\S+):(\d+)", timeout=10)
        self.host = m.group(1)
        self.port = int(m.group(2))
        self.address = f"{self.host}:{self.port}"

    def stats(self):
        return json.loads(http_get(self.port, "/_stats")[2])

    def reset(self):
        http_get(self.port, "/_reset")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop_process(self, timeout=5.0):
        """SIGSTOP, then waits until the kernel reports the process stopped (state T in
        /proc/PID/stat): from then on it reads, answers and writes nothing."""
        self.proc.send_signal(signal.SIGSTOP)

        def stopped():
            with open(f"/proc/{self.proc.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        wait_until(stopped, timeout=timeout, interval=0.005, what=f"{self.name} to stop")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


class BackendGroup:
    """Several test backends served by one rondel-test-backend process and its one event loop
    (`--and`): when the machine is busy they are all descheduled together, so none falls
    behind the others by chance. `members` are (name, address) records usable in make_config;
    `args` are flags given to every member, member_args(name) a list of flags for one."""

    class Member:
        def __init__(self, name, host, port):
            self.name, self.host, self.port = name, host, port
            self.address = f"{host}:{port}"

    def __init__(self, names, *args, member_args=lambda name: []):
        cmd = [BACKEND_BIN]
        for i, name in enumerate(names):
            cmd += (["--and"] if i else []) + ["--listen", "127.0.0.1:0", "--name", name, *args,
                                               *member_args(name)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _processes.append(self.proc)
        self.out = _LineReader(self.proc.stdout)
        rx = re.compile(r"^listening (\S+):(\d+)$")

        def listening():  # one line per member, in order; fails at once if the process exited
            found = [m for m in map(rx.match, list(self.out.lines)) if m]
            if len(found) < len(names) and self.out.ended:
                raise AssertionError("backend group exited:\n" + "\n".join(self.out.lines))
            return found if len(found) == len(names) else None
        found = wait_until(listening, timeout=10, what="every member listening")
        self.members = [self.Member(n, m.group(1), int(m.group(2))) for n, m in zip(names, found)]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def make_config(backends, pool=None, listener=None, admin=True, log=None, extra="", pool_name="p",
                listener_name="web"):
    """YAML text for one listener on port 0 in front of one pool of `backends`.

    backends: list of Backend objects or dicts {address, weight, id}. pool/listener: dicts of extra
    keys (values written as-is). admin: True for an admin listener on port 0.
    """
    lines = ["listeners:", f"  - name: {listener_name}", "    bind: 127.0.0.1:0",
             f"    pool: {pool_name}"]
    for k, v in (listener or {}).items():
        lines.append(f"    {k}: {v}")
    lines += ["pools:", f"  - name: {pool_name}"]
    for k, v in (pool or {}).items():
        lines.append(f"    {k}: {v}")
    lines.append("    backends:")
    for b in backends:
        if isinstance(b, (Backend, BackendGroup.Member)):
            b = {"address": b.address}
        fields = ", ".join(f"{k}: {v}" for k, v in b.items())
        lines.append(f"      - {{ {fields} }}")
    if admin:
        lines += ["admin:", "  bind: 127.0.0.1:0"]
    log = dict(log or {})
    log.setdefault("level", "info")
    lines.append("log:")
    for k, v in log.items():
        lines.append(f"  {k}: \"{v}\"" if isinstance(v, str) else f"  {k}: {v}")
    return "\n".join(lines) + "\n" + extra


class Rondel:
    """The rondel daemon on a config text. Learns its ports from its own log lines."""

    def __init__(self, config_text, workdir=None, expect_start=True, args=(), prefix=()):
        # prefix: a command that runs rondel, e.g. ("prlimit", "--nofile=128", "--"); it must
        # exec rondel (same pid) for the pid-based helpers below to see rondel itself.
        self.dir = workdir or tempfile.mkdtemp(prefix="rondel-it-")
        self.config_path = os.path.join(self.dir, "rondel.yaml")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.proc = subprocess.Popen([*prefix, RONDEL_BIN, "-f", self.config_path, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _processes.append(self.proc)
        self.out = _LineReader(self.proc.stdout)
        self.ports = {}
        self.admin_port = None
        if expect_start:
            self.out.wait_for(r"\binfo started\b", timeout=10)
            self._learn_ports()

    def _learn_ports(self):
        for line in list(self.out.lines):
            m = re.search(r"info listening name=(\S+) addr=\S+:(\d+)", line)
            if m:
                self.ports[m.group(1)] = int(m.group(2))
            m = re.search(r"info admin_listening addr=\S+:(\d+)", line)
            if m:
                self.admin_port = int(m.group(1))

    @property
    def port(self):
        return self.ports.get("web") or next(iter(self.ports.values()))

    def write_config(self, text):
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.config_path)

    def reload(self, text=None, expect_ok=True, timeout=10):
        """Writes `text` (if given), sends SIGHUP and waits for the reload's outcome line."""
        if text is not None:
            self.write_config(text)
        start = self.out.count()
        self.proc.send_signal(signal.SIGHUP)
        m = self.out.wait_for(r"\b(reload_ok|reload_failed)\b", timeout=timeout, start=start)
        ok = m.group(1) == "reload_ok"
        if expect_ok is not None and ok != expect_ok:
            raise AssertionError("reload outcome " + m.group(1) + ":\n" +
                                 "\n".join(self.out.lines[start:]))
        self._learn_ports()
        return ok

    def pools(self):
        return json.loads(http_get(self.admin_port, "/api/pools")[2])

    def route(self, pool, key):
        from urllib.parse import quote
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
        if self.proc.poll() is not None:
            self.out.join()  # an exited rondel's last lines may still be in the pipe
        if pattern is None:
            return list(self.out.lines)
        rx = re.compile(pattern)
        return [l for l in list(self.out.lines) if rx.search(l)]

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit code. Raises AssertionError when rondel's output
        holds a sanitizer report (ASan, LeakSanitizer at exit, UBSan): see sanitizer_reports()."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
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
        return [i for i, l in enumerate(list(self.out.lines)) if SANITIZER_RX.search(l)]

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

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cpu_seconds(self):
        """User + system CPU time rondel has used so far (from /proc/PID/stat)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def open_fds(self):
        """Number of file descriptors rondel has open."""
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def http_get(port, path, headers=None, timeout=10):
    """(status, headers dict lower-cased, body bytes) of one GET on a fresh connection."""
    return http_request(port, "GET", path, headers=headers, timeout=timeout)


def http_request(port, method, path, headers=None, body=None, timeout=10, conn=None):
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        if own:
            conn.close()


def raw_exchange(port, data, timeout=5.0, shutdown_write=False):
    """Sends raw bytes and returns everything received until the peer closes or `timeout`."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if shutdown_write:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                c = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks)
    finally:
        s.close()


def parse_responses(data):
    """Splits raw HTTP/1.1 responses (Content-Length or no body) into (status, headers, body)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


def main():
    unittest.main(verbosity=2)


# ---------------------------------------------------------------------------------------------
# Helpers added for the proxy data-path tests (test_proxy_*.py). Additive only.

class HttpConn:
    """One raw client connection: send bytes, read whole responses, see when the peer closes.

    read_response() understands Content-Length, chunked and close-delimited bodies and the
    bodiless cases (HEAD, 1xx, 204, 304). Every read is bounded by `timeout`.
    """

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, target, headers=None, body=b"", version="HTTP/1.1", host="t"):
        lines = [f"{method} {target} {version}"]
        hs = dict(headers or {})
        if host is not None:
            hs.setdefault("Host", host)
        if body and not any(k.lower() in ("content-length", "transfer-encoding") for k in hs):
            hs["Content-Length"] = str(len(body))
        lines += [f"{k}: {v}" for k, v in hs.items()]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def _fill(self, deadline):
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("read deadline")
        self.sock.settimeout(left)
        try:
            c = self.sock.recv(1 << 20)
        except ConnectionResetError:
            c = b""
        if not c:
            self.eof = True
            return False
        self.buf += c
        return True

    def _read_until(self, sep, deadline):
        while sep not in self.buf:
            if not self._fill(deadline):
                raise ConnectionError("connection closed before " + repr(sep))
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_exact(self, n, deadline, sink=None):
        got = 0
        chunks = []
        while got < n:
            if not self.buf and not self._fill(deadline):
                raise ConnectionError(f"connection closed after {got} of {n} body bytes")
            take = self.buf[:n - got]
            self.buf = self.buf[len(take):]
            got += len(take)
            if sink is not None:
                sink(take)
            else:
                chunks.append(take)
        return b"".join(chunks)

    def read_head(self, timeout=None):
        """(status, headers lower-cased, raw head) of the next response head (1xx included)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        raw = self._read_until(b"\r\n\r\n", deadline)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for l in lines[1:]:
            if l:
                k, _, v = l.partition(":")
                headers[k.strip().lower()] = v.strip()
        return status, headers, raw

    def read_response(self, method="GET", timeout=None, sink=None, skip_interim=True):
        """(status, headers, body) of the next response; body is b"" when `sink` takes it."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            status, headers, _ = self.read_head(timeout=deadline - time.monotonic())
            if status >= 200 or not skip_interim:
                break
        if method == "HEAD" or status < 200 or status in (204, 304):
            return status, headers, b""
        body = []
        put = sink or body.append
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                line = self._read_until(b"\r\n", deadline)
                n = int(line.split(b";")[0].strip(), 16)
                if n == 0:
                    while self._read_until(b"\r\n", deadline) != b"\r\n":
                        pass  # trailers
                    break
                self._read_exact(n, deadline, sink=put)
                self._read_until(b"\r\n", deadline)
        elif "content-length" in headers:
            self._read_exact(int(headers["content-length"]), deadline, sink=put)
        else:
            while self._fill(deadline) or self.buf:
                put(self.buf)
                self.buf = b""
        return status, headers, b"".join(body) if sink is None else b""

    def closed_by_peer(self, timeout=3.0):
        """True when the peer closes (EOF or reset) within `timeout` and sends nothing more."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except socket.timeout:
            return False
        return self.eof


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
                recs = [parse_kv(l) for l in f if l.startswith("access ")]
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


def read_ledger(path):
    """[(request_id, method, target, body_bytes)] from a test backend's --ledger file."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for l in f:
            parts = l.split()
            if len(parts) >= 4:
                out.append((parts[0], parts[1], parts[2], int(parts[3])))
    return out


_reserved_ports = []


def unused_port():
    """A port on 127.0.0.1 where connects are refused, for the life of this test process: a
    socket bound to port 0 that never listens holds it (bound then closed would leave the port
    free for any other process to take, and a connect to it might then succeed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _reserved_ports.append(s)
    return s.getsockname()[1]


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


class ScriptedBackend:
    """A tiny Python backend for responses the C++ test backend cannot produce (close-delimited
    bodies, interim 1xx, malformed heads). handler(method, target, head_bytes, body) returns
    (bytes to send, close_after). Requests are read with Content-Length bodies only. Connections
    and requests are counted in .connections / .requests."""

    def __init__(self, handler, read_body=True):
        self.handler = handler
        self.read_body = read_body  # False: answer right after the head, leave the body unread
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.connections = 0
        self.requests = 0
        self._stop = False
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def _accept(self):
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
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
                    while time.monotonic() < deadline and not self._stop:
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
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self._stop = True
        self.sock.close()


# ---- Metrics helpers (Prometheus text format, a real Prometheus server) -----------------------

_SAMPLE_RX = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$')
_LABEL_RX = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """(samples, types) of a Prometheus text exposition: samples is a list of
    (name, {label: value}, float); types maps each family name to its # TYPE."""
    samples, types = [], {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[name] = kind.strip()
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RX.match(line)
        if not m:
            raise AssertionError(f"unparsable metrics line: {line!r}")
        labels = {k: re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), v)
                  for k, v in _LABEL_RX.findall(m.group(3) or "")}
        samples.append((m.group(1), labels, float(m.group(4))))
    return samples, types


def metric_sum(samples, name, **labels):
    """Sum of the samples named `name` whose labels include `labels`."""
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == str(want) for k, want in labels.items()))


def scrape(admin_port):
    """(text, samples, types) of one GET /metrics."""
    status, _, body = http_get(admin_port, "/metrics")
    if status != 200:
        raise AssertionError(f"/metrics answered {status}")
    text = body.decode("utf-8")
    samples, types = parse_metrics(text)
    return text, samples, types


class Prometheus:
    """A real Prometheus server on 127.0.0.1 (high port, own temp storage) scraping `targets`
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
        # Port 0, read back from its log line `msg="Listening on" address=127.0.0.1:PORT`.
        self.proc = subprocess.Popen(
            [self.BIN, f"--config.file={cfg}", f"--storage.tsdb.path={self.dir}/data",
             "--web.listen-address=127.0.0.1:0", "--log.level=info"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _processes.append(self.proc)
        self.out = _LineReader(self.proc.stdout)
        m = self.out.wait_for(r'msg="Listening on" address=127\.0\.0\.1:(\d+)', timeout=20)
        self.port = int(m.group(1))

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
        from urllib.parse import quote
        status, _, body = http_get(self.port, "/api/v1/query?query=" + quote(expr, safe=""))
        data = json.loads(body)
        if status != 200 or data.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {status} {body[:300]!r}")
        return data["data"]["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        import shutil
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
