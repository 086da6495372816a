"""Large bodies, byte for byte: 256 MiB responses and uploads through rondel hash (SHA-256) the
same at both ends, with Content-Length and chunked framing, a slow client, a slow backend and a
client that stops reading; a backend that resets mid-body gives a truncated response and a close
(a prefix of the right bytes, never a wrong one, never a hang); a client that aborts mid-body
gets its backend connection closed, not reused, and the in-flight counts back to 0. A
Content-Length download or upload is spliced: its bytes never pass through rondel's user space
(/proc/PID/io). A chunked one, either way, is spliced chunk by chunk (the chunk-size lines read
and checked by rondel, the chunks of 16 KiB and more spliced, the small ones copied): a
malformed chunk-size line after spliced chunks gives a truncated response and a close, or for
an upload a 400 and a close with the backend connection closed before any byte of that line
reached it, never a wrong byte; a client stalling mid-chunk of a spliced upload gets the body
timeout's 408, its backend connection closed and not reused.

The backend is a Python one (StreamBackend) so that both ends hash what they actually sent or
received: its body is a random block of 1 MiB + 7 bytes repeated (no period that divides a
buffer or chunk size, so a dropped, doubled or reordered piece changes the hash), cut into
chunks of varied sizes when chunked. Bodies stream from that block and are hashed on the fly;
nothing holds a whole body.

Memory budget: rondel moves a body through bounded per-connection buffers (on the copy path a
16 KiB pooled one per side, the backend side's a 64 KiB one while a response body larger than
16 KiB streams; none for a spliced body, whose pipe is kernel memory), so one exchange holds
well under 1 MiB whatever the body size. We accept
RSS_GROWTH_KIB (8 MiB) of growth over the idle baseline while 256 MiB flows: buffering even a
thirty-second of one body would exceed it.

Runtime: about 1-2 s per 256 MiB transfer in a normal build on an idle 2-core machine (the
whole file ~25 s; each test prints its own time), a few times that under ASan."""
import hashlib
import os
import socket
import threading
import time

from harness import (HttpConn, Rondel, RondelTestCase, RssWatch, main, make_config, metric_sum,
                     sanitized_build, scrape, wait_until)

SIZE = 256 * 1024 * 1024
BLOCK = os.urandom((1 << 20) + 7)
WINDOW = memoryview(BLOCK * 2)  # any len(BLOCK) bytes of the stream are one slice of this
CHUNK_SIZES = (65536 + 3, 1, 300007, 4093, 1 << 20)  # chunked bodies cycle through these
RSS_GROWTH_KIB = 8 * 1024
TIMEOUT = 120 if sanitized_build() else 60


def pieces(offset, n, piece=len(BLOCK)):
    """The stream's bytes [offset, offset + n) as memoryviews of at most `piece` bytes."""
    end = offset + n
    while offset < end:
        at = offset % len(BLOCK)
        take = min(piece, end - offset, len(BLOCK))
        yield WINDOW[at:at + take]
        offset += take


def stream_sha256(n):
    h = hashlib.sha256()
    for p in pieces(0, n):
        h.update(p)
    return h.hexdigest()


def chunk_plan(n):
    """The chunk sizes of an n-byte chunked body (CHUNK_SIZES in turn, the last one cut)."""
    out, i = [], 0
    while n > 0:
        take = min(CHUNK_SIZES[i % len(CHUNK_SIZES)], n)
        out.append(take)
        n -= take
        i += 1
    return out


class Reader:
    """Buffered reads of one backend-side socket: heads, exact lengths, chunked bodies."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def fill(self, want=1 << 20):
        d = self.sock.recv(want)
        if not d:
            raise ConnectionError("peer closed")
        self.buf += d

    def until(self, sep):
        while (i := self.buf.find(sep)) < 0:
            self.fill()
        out = bytes(self.buf[:i + len(sep)])
        del self.buf[:i + len(sep)]
        return out

    def exact(self, n, put, slow_until=0):
        """Passes n bytes to put(); while fewer than slow_until bytes are read, reads at most
        64 KiB every 2 ms (a slow backend)."""
        got = 0
        while got < n:
            if not self.buf:
                if got < slow_until:
                    time.sleep(0.002)
                    self.fill(65536)
                else:
                    self.fill()
            take = min(len(self.buf), n - got)
            put(bytes(self.buf[:take]))
            del self.buf[:take]
            got += take

    def chunked(self, put, slow_until=0):
        total = 0
        while True:
            n = int(self.until(b"\r\n").split(b";")[0], 16)
            if n == 0:
                while self.until(b"\r\n") != b"\r\n":
                    pass
                return total
            self.exact(n, put, slow_until=max(0, slow_until - total))
            total += n
            self.until(b"\r\n")


class StreamBackend:
    """A Python backend on 127.0.0.1 port 0, one thread per connection, keep-alive.

    GET /...?size=N[&chunked=1][&reset=K][&drip=D][&gate=G][&badchunk=B]: N stream bytes;
    reset=K resets the connection (RST) after K body bytes; badchunk=B sends a malformed
    chunk-size line at the first chunk boundary at or after B bytes; drip=D sends the first D bytes in 64 KiB pieces
    2 ms apart (a slow backend); gate=G waits after G bytes until `client_got_first` is set (so
    the client provably has body bytes before the backend sent the whole body).
    PUT/POST: reads the body (Content-Length or chunked; ?slow=S reads the first S bytes
    slowly; ?reset=K resets the connection after K body bytes) and answers 200 with X-Body-Sha256 and X-Body-Bytes of what it received.
    Every response carries X-Conn (the connection's number); `uploads` counts the PUT/POST
    requests received, `upload_conn` is the connection of the last one. `sent` is the body bytes
    sent of the response in progress; `aborted` lists the connections whose peer went away
    mid-body; `ended` maps each connection the backend stopped serving to why (the exception:
    a ValueError is a malformed chunk-size line it received, None a clean close)."""

    def __init__(self, sndbuf=None):
        self.sndbuf = sndbuf
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.connections = 0
        self.uploads = 0
        self.upload_conn = 0  # the connection of the last PUT/POST
        self.ended = {}  # connection number -> why the backend stopped serving it
        self.sent = 0
        self.aborted = []
        self.errors = []
        self.client_got_first = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.sock.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            if self.sndbuf:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
            threading.Thread(target=self._serve, args=(c, self.connections), daemon=True).start()

    def _serve(self, c, conn):
        r = Reader(c)
        try:
            while True:
                head = r.until(b"\r\n\r\n").decode("latin-1").split("\r\n")
                method, target = head[0].split()[:2]
                headers = {k.strip().lower(): v.strip()
                           for k, _, v in (line.partition(":") for line in head[1:] if line)}
                _, _, query = target.partition("?")
                q = dict(kv.partition("=")[::2] for kv in query.split("&") if kv)
                if method in ("PUT", "POST"):
                    self.uploads += 1
                    self.upload_conn = conn
                    self._upload(c, r, headers, q, conn)
                else:
                    self._download(c, q, conn)
        except (ConnectionError, OSError, ValueError) as e:
            self.ended[conn] = e
        finally:
            self.ended.setdefault(conn, None)
            c.close()

    def _upload(self, c, r, headers, q, conn):
        h = hashlib.sha256()
        slow = int(q.get("slow", 0))
        if "reset" in q:  # read that many body bytes, then reset the connection
            r.exact(int(q["reset"]), h.update)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            raise ConnectionError("reset as asked")
        if "chunked" in headers.get("transfer-encoding", ""):
            n = r.chunked(h.update, slow_until=slow)
        else:
            n = int(headers.get("content-length", 0))
            r.exact(n, h.update, slow_until=slow)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Conn: %d\r\n"
                  b"X-Body-Bytes: %d\r\nX-Body-Sha256: %s\r\n\r\n"
                  % (conn, n, h.hexdigest().encode()))

    def _download(self, c, q, conn):
        size = int(q.get("size", 0))
        chunked = q.get("chunked") == "1"
        reset = int(q.get("reset", -1))
        drip, gate = int(q.get("drip", 0)), int(q.get("gate", -1))
        badchunk = int(q.get("badchunk", -1))
        framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % size
        c.sendall(b"HTTP/1.1 200 OK\r\n%s\r\nX-Conn: %d\r\n\r\n" % (framing, conn))
        self.sent = 0
        plan = chunk_plan(size) if chunked else [size]
        try:
            for n in plan:
                if chunked and 0 <= badchunk <= self.sent:
                    # A malformed chunk-size line; then the connection stays open, so only
                    # rondel's parsing of that line can end the client's response.
                    c.sendall(b"zz\r\n")
                    while c.recv(65536):
                        pass
                    raise ConnectionError("bad chunk sent")
                if chunked:
                    c.sendall(b"%x\r\n" % n)
                self._send_body(c, n, reset, drip, gate)
                if chunked:
                    c.sendall(b"\r\n")
            if chunked:
                c.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.aborted.append(conn)
            raise

    def _send_body(self, c, n, reset, drip, gate):
        """Sends the stream's next n bytes (from self.sent) with the reset, drip and gate rules."""
        end = self.sent + n
        while self.sent < end:
            limit = end
            for mark in (reset, drip, gate):
                if self.sent < mark < limit:
                    limit = mark
            slow = self.sent < drip
            for p in pieces(self.sent, limit - self.sent, 65536 if slow else len(BLOCK)):
                c.sendall(p)
                self.sent += len(p)
                if slow:
                    time.sleep(0.002)
            if self.sent == gate and not self.client_got_first.wait(TIMEOUT):
                self.errors.append("client saw no body byte while the backend held the rest")
            if self.sent == reset:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                c.close()
                raise ConnectionError("reset as asked")


class Received:
    """A client-side sink: counts and hashes body bytes; optional per-call hook."""

    def __init__(self, hook=None):
        self.n = 0
        self.h = hashlib.sha256()
        self.hook = hook

    def __call__(self, b):
        self.h.update(b)
        self.n += len(b)
        if self.hook:
            self.hook(self)


def io_bytes(pid):
    """Bytes the process moved through read()/write()-family calls so far (/proc/PID/io rchar +
    wchar): what passed through its user space. splice(2) counts in neither."""
    with open(f"/proc/{pid}/io") as f:
        fields = dict(line.split(":") for line in f)
    return int(fields["rchar"]) + int(fields["wchar"])


def socket_buffer_bytes():
    """Largest kernel buffers a loopback TCP socket may autotune to: (rmem max, wmem max)."""
    with open("/proc/sys/net/ipv4/tcp_rmem") as f:
        rmem = int(f.read().split()[2])
    with open("/proc/sys/net/ipv4/tcp_wmem") as f:
        wmem = int(f.read().split()[2])
    return rmem, wmem


class LargeBodies(RondelTestCase):
    @classmethod
    def start_backends(cls):
        cls.backend = StreamBackend(sndbuf=256 * 1024)
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config([cls.backend])

    @classmethod
    def setUpClass(cls):
        cls.sha = stream_sha256(SIZE)
        super().setUpClass()
        for _ in range(3):  # warm the buffer pools and paths, then take the baseline
            with HttpConn(cls.rondel.port) as c:
                c.request("GET", "/warm?size=4000000")
                c.read_response()
                c.request("PUT", "/warm", body=b"w" * 4000000)
                c.read_response()
        cls.rondel.wait_idle()
        cls.baseline = cls.rondel.rss_kib()

    def setUp(self):
        self.t0 = time.monotonic()
        self.backend.client_got_first.clear()
        # Under ASan every freed block waits in the allocator's quarantine (up to 256 MiB), so
        # the RSS of a long-lived rondel climbs test after test (by 9 MiB over this file's 22
        # tests in one CI run) without anything being held; there each test's growth counts
        # from its own start, which still catches a transfer buffering a thirty-second of its
        # body. The normal build counts from the class's baseline: a slow leak adds up too.
        self.start_rss = self.rondel.rss_kib()
        self.watch = RssWatch(self.rondel.rss_kib)

    def tearDown(self):
        peak = self.watch.stop()
        self.rondel.wait_idle()
        print(f"{self._testMethodName}: {time.monotonic() - self.t0:.1f} s, rss baseline "
              f"{self.baseline} KiB, peak {peak} KiB", flush=True)
        self.assertEqual(self.backend.errors, [])
        base = self.start_rss if sanitized_build() else self.baseline
        self.assertLess(peak - base, RSS_GROWTH_KIB, f"rondel's RSS grew by {peak - base} KiB")

    def samples(self):
        return scrape(self.rondel.admin_port)[1]

    def get(self, query, sink, conn=None):
        """GET /big?QUERY through rondel into sink; (status, headers)."""
        c = conn or HttpConn(self.rondel.port, timeout=TIMEOUT)
        try:
            c.request("GET", f"/big?{query}")
            status, headers, _ = c.read_response(timeout=TIMEOUT, sink=sink)
            return status, headers
        finally:
            if conn is None:
                c.close()

    def download(self, chunked, hook=None, extra="", size=SIZE):
        before = self.samples()
        got = Received(hook)
        status, h = self.get(f"size={size}&chunked={int(chunked)}{extra}", got)
        self.assertEqual(status, 200)
        self.assertEqual(got.n, size)
        self.assertEqual(got.h.hexdigest(), self.sha if size == SIZE else stream_sha256(size))
        if chunked:
            self.assertEqual(h.get("transfer-encoding"), "chunked")
        else:
            self.assertEqual(int(h["content-length"]), SIZE)
        after = self.samples()
        for family in ("rondel_client_sent_bytes_total", "rondel_backend_received_bytes_total"):
            moved = metric_sum(after, family) - metric_sum(before, family)
            self.assertGreaterEqual(moved, size, family)
            self.assertLess(moved, size + size // 100 + 4096, family)  # head + chunk lines
        return got

    def upload(self, chunked, query="", slow_client=0, size=SIZE):
        before = self.samples()
        with HttpConn(self.rondel.port, timeout=TIMEOUT) as c:
            framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
            c.send(f"PUT /up?{query} HTTP/1.1\r\nHost: t\r\n{framing}\r\n\r\n".encode())
            sent = 0
            for n in chunk_plan(size) if chunked else [size]:
                if chunked:
                    c.send(b"%x\r\n" % n)
                for p in pieces(sent, n, 65536 if sent < slow_client else len(BLOCK)):
                    c.send(p)
                    sent += len(p)
                    if sent < slow_client:
                        time.sleep(0.002)
                if chunked:
                    c.send(b"\r\n")
            if chunked:
                c.send(b"0\r\n\r\n")
            status, h, _ = c.read_response(timeout=TIMEOUT)
        self.assertEqual(status, 200)
        self.assertEqual(int(h["x-body-bytes"]), size)
        self.assertEqual(h["x-body-sha256"], self.sha if size == SIZE else stream_sha256(size))
        after = self.samples()
        for family in ("rondel_client_received_bytes_total", "rondel_backend_sent_bytes_total"):
            moved = metric_sum(after, family) - metric_sum(before, family)
            self.assertGreaterEqual(moved, size, family)
            self.assertLess(moved, size + size // 100 + 4096, family)  # head + chunk lines

    # ---- downloads ----

    def test_download_content_length(self):
        self.download(chunked=False)

    def test_download_chunked(self):
        # Chunked to chunked is spliced chunk by chunk. What still passes through user space:
        # the chunk-size lines, the small chunks of CHUNK_SIZES (1 and 4093 bytes) and, at each
        # return to the copy path, one read of what follows them; the copy path would move
        # 512 MiB (read + write).
        before = io_bytes(self.rondel.pid)
        self.download(chunked=True)
        copied = io_bytes(self.rondel.pid) - before
        print(f"  bytes through rondel's user space: {copied}")
        self.assertLess(copied, SIZE // 8)

    def test_download_chunked_slow_client(self):
        paused = [0.0]

        def slow(got):
            if got.n < 16 << 20 and paused[0] < 1.0:
                time.sleep(0.002)
                paused[0] += 0.002
        self.download(chunked=True, hook=slow, size=64 << 20)

    def test_download_chunked_bad_chunk_line_mid_body(self):
        # After 8 MiB of chunks (the last of them a spliced 1 MiB one) the backend sends "zz" as
        # a chunk size and keeps the connection open: rondel must parse that line, close the
        # client connection and send no byte of it.
        got = Received()
        with HttpConn(self.rondel.port, timeout=TIMEOUT) as c:
            with self.assertRaises(ConnectionError):
                self.get(f"size={SIZE}&chunked=1&badchunk={8 << 20}", got, conn=c)
            self.assertTrue(c.eof, "rondel did not close the client connection")
        self.assertGreaterEqual(got.n, 8 << 20)
        self.assertLess(got.n, SIZE)
        self.assertEqual(got.h.hexdigest(), stream_sha256(got.n), "a wrong byte in the prefix")

    def test_download_content_length_never_enters_user_space(self):
        # Content-Length to Content-Length is spliced: of 256 MiB, rondel reads and writes
        # only the heads itself (the copy path reads and writes every byte: 512 MiB).
        before = io_bytes(self.rondel.pid)
        self.download(chunked=False)
        copied = io_bytes(self.rondel.pid) - before
        print(f"  bytes through rondel's user space: {copied}")
        self.assertLess(copied, 1 << 20)

    def test_download_slow_client(self):
        # The first 32 MiB read with a 2 ms pause after every read (at most 1.5 s of pauses).
        paused = [0.0]

        def slow(got):
            if got.n < 32 << 20 and paused[0] < 1.5:
                time.sleep(0.002)
                paused[0] += 0.002
        self.download(chunked=False, hook=slow)

    def test_download_client_pauses_reading(self):
        self.client_pauses_reading(chunked=False, size=SIZE)

    def test_download_chunked_client_pauses_reading(self):
        self.client_pauses_reading(chunked=True, size=64 << 20)

    def client_pauses_reading(self, chunked, size):
        # At 16 MiB the client stops reading until the backend has stopped sending. Without
        # backpressure rondel would take the whole body; with it, what the backend sent beyond
        # what the client read is bounded by the socket buffers between them plus rondel's own.
        rmem, wmem = socket_buffer_bytes()
        c = HttpConn(self.rondel.port, timeout=TIMEOUT)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        # Client receive + rondel's client-side send + rondel's backend-side receive + the
        # backend's send buffer (256 KiB, doubled by the kernel), plus 1 MiB for rondel itself.
        bound = 2 * 256 * 1024 + wmem + rmem + 2 * 256 * 1024 + (1 << 20)
        checked = []

        def pause(got):
            if not checked and got.n >= 16 << 20:
                last = [-1]

                def stalled():
                    now = self.backend.sent
                    still = now == last[0]
                    last[0] = now
                    return still
                wait_until(stalled, timeout=TIMEOUT, interval=0.3, what="the backend to stall")
                checked.append(self.backend.sent - got.n)
        with c:
            got = Received(pause)
            status, _ = self.get(f"size={size}&chunked={int(chunked)}", got, conn=c)
        self.assertEqual(status, 200)
        self.assertEqual((got.n, got.h.hexdigest()), (size, stream_sha256(size)))
        print(f"  backend ahead of the paused client by {checked[0]} bytes (bound {bound})")
        self.assertLess(checked[0], bound)

    def test_download_chunked_slow_backend(self):
        # The backend sends the first 4 MiB in 64 KiB pieces 2 ms apart, and after 1 MiB waits
        # until the client has body bytes: rondel streams, it does not store and forward.
        def first(got):
            self.backend.client_got_first.set()
        self.download(chunked=True, hook=first, extra=f"&drip={4 << 20}&gate={1 << 20}")

    def test_spliced_responses_keep_both_connections_alive(self):
        # Three 4 MiB responses on one client connection: each exact, and all from the same
        # backend connection, so the splice stopped at each body's end and left the connection
        # clean for the next exchange.
        n = 4 << 20
        conns = []
        with HttpConn(self.rondel.port, timeout=TIMEOUT) as c:
            for _ in range(3):
                got = Received()
                status, h = self.get(f"size={n}", got, conn=c)
                self.assertEqual((status, got.n, got.h.hexdigest()), (200, n, stream_sha256(n)))
                conns.append(h["x-conn"])
        self.assertEqual(len(set(conns)), 1, f"backend connections used: {conns}")

    # ---- uploads ----

    def test_upload_content_length(self):
        # A Content-Length upload is spliced to the backend: of 256 MiB, rondel reads and writes
        # only the heads itself (the copy path moves 512 MiB through its user space).
        before = io_bytes(self.rondel.pid)
        self.upload(chunked=False)
        copied = io_bytes(self.rondel.pid) - before
        print(f"  bytes through rondel's user space: {copied}")
        self.assertLess(copied, 1 << 20)

    def test_upload_backend_reset_mid_body_not_resent(self):
        # The backend resets after 8 MiB of a spliced upload: the client gets a 502 or a close,
        # the body is never sent again (one backend connection for the request, no retry), and
        # the in-flight counts return to 0.
        uploads = self.backend.uploads
        with HttpConn(self.rondel.port, timeout=TIMEOUT) as c:
            c.send(f"POST /up?reset={8 << 20} HTTP/1.1\r\nHost: t\r\n"
                   f"Content-Length: {SIZE}\r\n\r\n".encode())
            status = None
            try:
                for p in pieces(0, 64 << 20):
                    c.send(p)
                status, _, _ = c.read_response(timeout=TIMEOUT)
            except (ConnectionError, OSError):
                pass
        self.assertIn(status, (None, 502))
        wait_until(lambda: metric_sum(self.samples(), "rondel_backend_in_flight") == 0
                   and metric_sum(self.samples(), "rondel_pool_in_flight") == 0,
                   timeout=10, what="rondel_backend_in_flight and rondel_pool_in_flight to be 0")
        self.assertEqual(self.backend.uploads - uploads, 1, "the request body was sent again")

    def test_upload_chunked(self):
        # Chunked to chunked is spliced chunk by chunk, as for responses: what still passes
        # through user space is the chunk-size lines, the small chunks and, at each return to
        # the copy path, one buffer's read (the copy path would move 512 MiB).
        before = io_bytes(self.rondel.pid)
        self.upload(chunked=True)
        copied = io_bytes(self.rondel.pid) - before
        print(f"  bytes through rondel's user space: {copied}")
        self.assertLess(copied, SIZE // 8)

    def test_upload_chunked_slow_backend(self):
        self.upload(chunked=True, query=f"slow={8 << 20}", size=16 << 20)

    def test_upload_chunked_bad_chunk_line_mid_body(self):
        # A 4 MiB chunk (spliced), then "zz" as a chunk size: rondel reads and rejects that line
        # itself, so the client gets a 400 and a close, the backend connection is closed mid-body
        # and never sees a byte of the line (a ValueError there), and the in-flight counts
        # return to 0.
        n = 4 << 20
        before = io_bytes(self.rondel.pid)
        with HttpConn(self.rondel.port, timeout=TIMEOUT) as c:
            c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            c.send(b"%x\r\n" % n)
            for p in pieces(0, n):
                c.send(p)
            c.send(b"\r\nzz\r\n")
            status, _, _ = c.read_response(timeout=TIMEOUT)
            self.assertEqual(status, 400)
            self.assertTrue(c.closed_by_peer(timeout=TIMEOUT), "rondel kept the client connection")
        copied = io_bytes(self.rondel.pid) - before
        self.assertLess(copied, n // 4, "the chunk was not spliced")
        conn = self.backend.upload_conn
        wait_until(lambda: conn in self.backend.ended, timeout=TIMEOUT,
                   what="rondel to close the backend connection")
        self.assertIsInstance(self.backend.ended[conn], ConnectionError,
                              f"the backend saw {self.backend.ended[conn]!r}")
        self.wait_in_flight_zero()

    def test_upload_chunked_client_stalls_mid_chunk(self):
        # 1 MiB into a 4 MiB chunk the client sends nothing more: the spliced upload waits on
        # the client, so the body timeout (1 s here) answers 408; the backend connection is
        # closed, not reused, and the in-flight counts return to 0.
        r = Rondel(make_config([self.backend], listener={"body_timeout": "1s"}))
        try:
            before = io_bytes(r.pid)
            with HttpConn(r.port, timeout=TIMEOUT) as c:
                c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
                c.send(b"%x\r\n" % (4 << 20))
                for p in pieces(0, 1 << 20):
                    c.send(p)
                status, _, _ = c.read_response(timeout=TIMEOUT)
                self.assertEqual(status, 408)
                self.assertTrue(c.closed_by_peer(timeout=TIMEOUT))
            self.assertLess(io_bytes(r.pid) - before, 256 << 10, "the chunk was not spliced")
            conn = self.backend.upload_conn
            wait_until(lambda: conn in self.backend.ended, timeout=TIMEOUT,
                       what="rondel to close the backend connection")
            self.wait_in_flight_zero(r)
            with HttpConn(r.port, timeout=TIMEOUT) as c:
                status, h = self.get("size=10", Received(), conn=c)
            self.assertEqual(status, 200)
            self.assertNotEqual(int(h["x-conn"]), conn, "the stalled upload's connection was reused")
        finally:
            self.assertEqual(r.stop(), 0)

    def test_tls_listener_copy_path_byte_exact(self):
        # A TLS listener takes the copy path, where bodies larger than 16 KiB stream through
        # 64 KiB buffers (the backend side's for responses, the client side's for uploads):
        # Content-Length and chunked, both ways, byte-exact on one keep-alive connection (16 MiB
        # each: 256 buffers of the large class).
        from tls_certs import Certs
        import ssl
        cert, key = Certs().leaf("big", ["big.test"])
        tls = f"{{ certificates: [ {{ cert: {cert}, key: {key} }} ] }}"
        r = Rondel(make_config([self.backend], listener={"tls": tls}))
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        n = 16 << 20
        sha = stream_sha256(n)
        try:
            raw = socket.create_connection(("127.0.0.1", r.port), timeout=TIMEOUT)
            with HttpConn(r.port, timeout=TIMEOUT,
                          sock=ctx.wrap_socket(raw, server_hostname="big.test")) as c:
                for chunked in (False, True):
                    got = Received()
                    status, _ = self.get(f"size={n}&chunked={int(chunked)}", got, conn=c)
                    self.assertEqual((status, got.n, got.h.hexdigest()), (200, n, sha))
                for chunked in (False, True):
                    framing = ("Transfer-Encoding: chunked" if chunked
                               else f"Content-Length: {n}")
                    c.send(f"PUT /up HTTP/1.1\r\nHost: t\r\n{framing}\r\n\r\n".encode())
                    sent = 0
                    for size in chunk_plan(n) if chunked else [n]:
                        if chunked:
                            c.send(b"%x\r\n" % size)
                        for p in pieces(sent, size):
                            c.send(p)
                            sent += len(p)
                        if chunked:
                            c.send(b"\r\n")
                    if chunked:
                        c.send(b"0\r\n\r\n")
                    status, h, _ = c.read_response(timeout=TIMEOUT)
                    self.assertEqual((status, int(h["x-body-bytes"]), h["x-body-sha256"]),
                                     (200, n, sha))
        finally:
            self.assertEqual(r.stop(), 0)

    def wait_in_flight_zero(self, rondel=None):
        port = (rondel or self.rondel).admin_port
        wait_until(lambda: metric_sum(scrape(port)[1], "rondel_backend_in_flight") == 0
                   and metric_sum(scrape(port)[1], "rondel_pool_in_flight") == 0,
                   timeout=10, what="rondel_backend_in_flight and rondel_pool_in_flight to be 0")

    def test_upload_content_length_slow_backend(self):
        self.upload(chunked=False, query=f"slow={8 << 20}")

    def test_upload_chunked_slow_client(self):
        self.upload(chunked=True, slow_client=4 << 20)

    # ---- failures mid-body ----

    def reset_mid_body(self, chunked):
        got = Received()
        with HttpConn(self.rondel.port, timeout=TIMEOUT) as c:
            with self.assertRaises(ConnectionError):
                self.get(f"size={SIZE}&chunked={int(chunked)}&reset={8 << 20}", got, conn=c)
            self.assertTrue(c.eof, "rondel did not close the client connection")
        self.assertLess(got.n, SIZE)
        self.assertEqual(got.h.hexdigest(), stream_sha256(got.n), "a wrong byte in the prefix")

    def test_backend_reset_mid_body_content_length(self):
        self.reset_mid_body(chunked=False)

    def test_backend_reset_mid_body_chunked(self):
        # No terminating zero-size chunk: the client must not take the body as complete. The
        # reset comes inside a 1 MiB chunk, while its data is spliced.
        self.reset_mid_body(chunked=True)

    def test_client_abort_mid_body(self):
        aborted = len(self.backend.aborted)
        c = HttpConn(self.rondel.port, timeout=TIMEOUT)
        c.request("GET", f"/big?size={SIZE}")
        status, h, _ = c.read_head()
        self.assertEqual(status, 200)
        conn = int(h["x-conn"])
        while len(c.buf) < 8 << 20:
            self.assertTrue(c.read_more())
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.close()  # a reset, with 248 MiB still to come
        wait_until(lambda: len(self.backend.aborted) > aborted, timeout=TIMEOUT,
                   what="rondel to close the backend connection")
        self.assertEqual(self.backend.aborted[-1], conn)
        wait_until(lambda: metric_sum(self.samples(), "rondel_backend_in_flight") == 0
                   and metric_sum(self.samples(), "rondel_pool_in_flight") == 0,
                   timeout=10, what="rondel_backend_in_flight and rondel_pool_in_flight to be 0")
        status, h = self.get("size=10", Received())
        self.assertEqual(status, 200)
        self.assertNotEqual(int(h["x-conn"]), conn, "the aborted backend connection was reused")


if __name__ == "__main__":
    main()
