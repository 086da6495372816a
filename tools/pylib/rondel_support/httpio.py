"""HTTP/1 on 127.0.0.1: the one response reader over a raw socket (HttpConn), and a small client.

HttpConn.read_response() understands Content-Length, chunked and close-delimited bodies and the
bodiless cases (HEAD, 1xx, 204, 304); bytes after a response stay in `buf` for the next one
(pipelining). Every read is bounded in time.
"""

import http.client
import socket
import time


def parse_head(raw):
    """(status, headers with lower-cased names) of a response head (bytes up to the blank line,
    which may be included). A repeated header keeps its last value."""
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return status, headers


def format_request(method, target, headers=None, body=b"", version="HTTP/1.1", host="t"):
    """The bytes of one request: request line, `headers` in order, then `Host: host` unless
    host is None or headers has a "Host" key, Content-Length when there is a body and no framing
    header, the body."""
    lines = [f"{method} {target} {version}"]
    hs = dict(headers or {})
    if host is not None:
        hs.setdefault("Host", host)
    if body and not any(k.lower() in ("content-length", "transfer-encoding") for k in hs):
        hs["Content-Length"] = str(len(body))
    lines += [f"{k}: {v}" for k, v in hs.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpConn:
    """One raw client connection: send bytes, read whole responses, see when the peer closes.

    Reads raise socket.timeout past their deadline and ConnectionError when the peer closes
    before a response is complete (for a body: "connection closed after G of N body bytes").
    A reset reads as a close.
    """

    def __init__(self, port, timeout=10.0, host="127.0.0.1", sock=None):
        self.sock = sock or socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def fileno(self):
        return self.sock.fileno()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, target, headers=None, body=b"", version="HTTP/1.1", host="t"):
        """Sends format_request(...)."""
        self.send(format_request(method, target, headers, body, version, host))

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

    def read_more(self, timeout=None):
        """Reads what the peer sends next into `buf`; False at EOF."""
        return self._fill(time.monotonic() + (timeout or self.timeout))

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
        status, headers = parse_head(raw)
        return status, headers, raw

    def read_response(self, method="GET", timeout=None, sink=None, skip_interim=True):
        """(status, headers, body) of the next response; body is b"" when `sink` takes it.
        skip_interim=False returns a 1xx response as it comes."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            status, headers, _ = self.read_head(timeout=deadline - time.monotonic())
            if status >= 200 or not skip_interim:
                break
        left = max(deadline - time.monotonic(), 1e-6)
        return status, headers, self.read_body(status, headers, method, left, sink)

    def read_body(self, status, headers, method="GET", timeout=None, sink=None):
        """The body of a response whose head read_head() returned (b"" when `sink` takes it):
        none for HEAD, 1xx, 204 and 304; else by chunked, Content-Length or the close."""
        deadline = time.monotonic() + (timeout or self.timeout)
        if method == "HEAD" or status < 200 or status in (204, 304):
            return b""
        body = []
        put = sink or body.append
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._read_chunked(deadline, put)
        elif "content-length" in headers:
            self._read_exact(int(headers["content-length"]), deadline, sink=put)
        else:
            while self._fill(deadline) or self.buf:
                put(self.buf)
                self.buf = b""
        return b"".join(body) if sink is None else b""

    def _read_chunked(self, deadline, put):
        while True:
            line = self._read_until(b"\r\n", deadline)
            n = int(line.split(b";")[0].strip(), 16)
            if n == 0:
                while self._read_until(b"\r\n", deadline) != b"\r\n":
                    pass  # trailers
                return
            self._read_exact(n, deadline, sink=put)
            self._read_until(b"\r\n", deadline)

    def closed_by_peer(self, timeout=3.0):
        """True when the peer closes (EOF or reset) within `timeout`; what it sends meanwhile
        is kept in `buf`."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except socket.timeout:
            return False
        return self.eof


def exchange(port, method, target, headers=None, body=b"", timeout=10.0, host="t"):
    """(status, headers, body) of one request on a fresh raw connection (closed afterwards)."""
    with HttpConn(port, timeout=timeout) as c:
        c.request(method, target, headers=headers, body=body, host=host)
        return c.read_response(method)


def http_request(port, method, path, headers=None, body=None, timeout=10, conn=None):
    """(status, headers dict lower-cased, body bytes) through http.client, on `conn` (an
    http.client.HTTPConnection, left open) or on a fresh connection (closed afterwards)."""
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


def http_get(port, path, headers=None, timeout=10):
    """(status, headers dict lower-cased, body bytes) of one GET on a fresh connection."""
    return http_request(port, "GET", path, headers=headers, timeout=timeout)


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
            except (socket.timeout, ConnectionResetError):
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks)
    finally:
        s.close()


def parse_responses(data):
    """Splits raw HTTP/1.1 responses (Content-Length or no body) into [(status, headers, body)]."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        status, headers = parse_head(head)
        n = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


def wait_http(port, alive=lambda: True, timeout=10.0, path="/"):
    """Waits until a GET `path` on 127.0.0.1:port gets a response head (any status): the
    server is serving, not only listening. RuntimeError when alive() turns false (the server
    exited) or after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server on port {port} exited before it answered")
        try:
            with HttpConn(port, timeout=min(2.0, max(0.1, deadline - time.monotonic()))) as c:
                c.request("GET", path, host=f"127.0.0.1:{port}")
                return c.read_head()[0]
        except (OSError, ConnectionError) as e:
            last = e
            time.sleep(0.05)
    raise RuntimeError(f"no HTTP answer on 127.0.0.1:{port} within {timeout}s ({last})")
