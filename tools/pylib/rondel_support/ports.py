"""Ports, always from port 0: read back from the log line of the process that bound it, or
held by a listening socket that is handed to the child (for daemons that log no port, such as
HAProxy and nginx). Never bound, closed and reused (another process can take it in between).
"""

import os
import re
import socket

# rondel-test-backend: "listening HOST:PORT", one line per backend (--and groups), on stdout.
TEST_BACKEND_LISTENING = r"^listening (\S+):(\d+)$"
# rondel: "... info listening name=NAME addr=HOST:PORT" and "... info admin_listening addr=...".
RONDEL_LISTENING = re.compile(r"info listening name=(\S+) addr=\S+:(\d+)")
RONDEL_ADMIN_LISTENING = re.compile(r"info admin_listening addr=\S+:(\d+)")
# Prometheus (--web.listen-address=127.0.0.1:0, --log.level=info): the address it bound.
PROMETHEUS_LISTENING = r'msg="Listening on" address=(\S+):(\d+)'


def read_listening(reader, pattern=TEST_BACKEND_LISTENING, count=1, timeout=10.0, start=0):
    """[(host, port)] of the first `count` lines of `reader` (a procs.LineReader) that match
    `pattern`, whose groups 1 and 2 are the host and the port; waits up to `timeout` s."""
    return [(m.group(1), int(m.group(2)))
            for m in reader.wait_for_all(pattern, count, timeout, start)]


def rondel_ports(lines):
    """({listener name: port}, admin port or None) from rondel's log lines; later lines win
    (after a reload a listener may be bound again)."""
    ports, admin = {}, None
    for line in lines:
        m = RONDEL_LISTENING.search(line)
        if m:
            ports[m.group(1)] = int(m.group(2))
        m = RONDEL_ADMIN_LISTENING.search(line)
        if m:
            admin = int(m.group(1))
    return ports, admin


class HeldListener:
    """A TCP socket listening on 127.0.0.1, port 0, whose port is known before any child starts.

    Give fd to a child that can take over a listening socket (HAProxy `bind fd@N`, nginx's
    NGINX="N;" environment variable) with pass_fds=[fd], then close() this copy once the child
    runs: the port stays the child's, and nobody else could have bound it in between.
    """

    def __init__(self, host="127.0.0.1", backlog=4096):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.sock.set_inheritable(True)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.address = f"{host}:{self.port}"

    @property
    def fd(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()


def nginx_inherit_env(listeners, env=None):
    """A copy of `env` (default os.environ) that makes nginx take over `listeners`
    (HeldListener objects) instead of binding their addresses itself."""
    out = dict(os.environ if env is None else env)
    out["NGINX"] = "".join(f"{h.fd};" for h in listeners)
    return out


class ClosedPort:
    """A port on `host` (127.0.0.1) where connects are refused for as long as this object is
    held, for a backend address that must refuse connections: a socket bound to port 0 that
    never listens keeps the port (bound, then closed, would leave it free for any other process
    to take, and a connect to it might then succeed). Not for listening on: use port 0."""

    def __init__(self, host="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.address = f"{host}:{self.port}"

    def close(self):
        """Releases the port (from then on another process may take it)."""
        self.sock.close()


def closed_port(host="127.0.0.1"):
    """A ClosedPort on `host`: keep it (its `.port`) for as long as connects must be refused."""
    return ClosedPort(host)
