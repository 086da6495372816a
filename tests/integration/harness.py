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


def _cleanup():
    for p in _processes:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except Exception:
                pass


atexit.register(_cleanup)


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
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()

    def wait_for(self, pattern, timeout=10.0, start=0):
        """Returns the first match of regex `pattern` in lines[start:], waiting up to timeout."""
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
                if left <= 0:
                    raise AssertionError(
                        f"no line matching {pattern!r} within {timeout}s; last lines:\n" +
                        "\n".join(self.lines[-20:]))
                self._cv.wait(left)

    def count(self):
        with self._cv:
            return len(self.lines)


class Backend:
    """One rondel-test-backend process. `args` are extra CLI flags (see its --help)."""

    def __init__(self, name, *args, host="127.0.0.1"):
        self.name = name
        self.proc = subprocess.Popen(
            [BACKEND_BIN, "--listen", f"{host}:0", "--name", name, *args],
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
        if isinstance(b, Backend):
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

    def __init__(self, config_text, workdir=None, expect_start=True, args=()):
        self.dir = workdir or tempfile.mkdtemp(prefix="rondel-it-")
        self.config_path = os.path.join(self.dir, "rondel.yaml")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.proc = subprocess.Popen([RONDEL_BIN, "-f", self.config_path, *args],
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

    def wait_idle(self, timeout=10):
        wait_until(lambda: self.in_flight() == 0, timeout=timeout, what="in-flight counts to be 0")

    def lines(self, pattern=None):
        if pattern is None:
            return list(self.out.lines)
        rx = re.compile(pattern)
        return [l for l in list(self.out.lines) if rx.search(l)]

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
                raise AssertionError("rondel did not exit within %ss of SIGTERM" % timeout)
        return self.proc.returncode

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


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
