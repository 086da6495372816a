"""Exchange timeouts measure inactivity (issue 13, defects 1 and 2).

backend_io_timeout is re-armed by progress in either direction (a slow streamed download and a
slow upload outlive it), while a backend that goes silent is still cut: 504 before the response
head, a close after it. body_timeout does not run while rondel itself stopped reading the client
because the backend is slow to take the body (backpressure): the client gets the response, not a
408 for the backend's stall."""
import threading
import time

from harness import ConnBackend, HttpConn, RondelTestCase, main, make_config


def read_head(c, buf):
    """Reads one request head after `buf`; returns (head text, bytes already read past it)."""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            raise ConnectionError("eof before head")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def content_length(head):
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            return int(v)
    return 0


def read_body(c, n, rest):
    """Reads an n-byte body (counted, not kept); returns (n, bytes read past it)."""
    got = len(rest)
    while got < n:
        d = c.recv(1 << 20)
        if not d:
            raise ConnectionError("eof in body")
        got += len(d)
        rest = d
    return n, rest[len(rest) - (got - n):] if got > n else b""


# The timeout is 2 s, so each 200 ms gap of a slow transfer (a Python thread's sleep) has 1.8 s
# of slack for a stalled thread, and the 5 s transfers still last more than twice the timeout:
# a timer that progress does not re-arm still cuts them.
IO_TIMEOUT = "2s"
DRIP_CHUNKS = 25     # 5-byte chunks, one every 200 ms: a 5 s download
DRIP_GAP = 0.2
SILENCE = 15.0       # a backend gone silent; far longer than the timeout (its thread is a daemon)


def serve(c):
    """Serves requests on one connection until the peer closes; a silent one ends it."""
    rest = b""
    while True:
        head, rest = read_head(c, rest)
        target = head.split()[1]
        if target == "/drip":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (5 * DRIP_CHUNKS))
            for _ in range(DRIP_CHUNKS):
                time.sleep(DRIP_GAP)
                c.sendall(b"drip\n")
        elif target in ("/upload", "/slow-reader"):
            if target == "/slow-reader":
                # Takes nothing of the body for 2.5 s (the socket buffers fill, rondel stops
                # reading the client), then reads it all and answers.
                time.sleep(2.5)
            n, rest = read_body(c, content_length(head), rest)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d" % (len(str(n)), n))
        elif target == "/silent-before-head":
            time.sleep(SILENCE)
            return
        elif target == "/silent-after-head":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst")
            time.sleep(SILENCE)
            return


class BackendIoTimeoutIsInactivity(RondelTestCase):
    @classmethod
    def start_backends(cls):
        cls.backend = ConnBackend(serve, timeout=20)
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config(
            [{"address": cls.backend.address}],
            pool={"backend_io_timeout": IO_TIMEOUT, "response_header_timeout": IO_TIMEOUT,
                  "retries": 0})

    def test_streamed_download_outlives_io_timeout(self):
        t0 = time.monotonic()
        with HttpConn(self.rondel.port, timeout=15) as c:
            c.request("GET", "/drip")
            status, _, body = c.read_response()
        self.assertEqual(status, 200)
        self.assertEqual(body, b"drip\n" * DRIP_CHUNKS)
        self.assertGreater(time.monotonic() - t0, 4.0)  # it really lasted past the 2 s timeout

    def test_slow_upload_outlives_io_timeout(self):
        chunks = 25
        with HttpConn(self.rondel.port, timeout=15) as c:
            c.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (5 * chunks))
            for _ in range(chunks):
                time.sleep(0.2)
                c.send(b"12345")
            status, _, body = c.read_response()
        self.assertEqual(status, 200)
        self.assertEqual(body, b"%d" % (5 * chunks))

    def test_backend_silent_before_head_gets_504(self):
        with HttpConn(self.rondel.port, timeout=15) as c:
            c.request("GET", "/silent-before-head")
            status, _, _ = c.read_response()
        self.assertEqual(status, 504)

    def test_backend_silent_after_head_is_cut(self):
        t0 = time.monotonic()
        with HttpConn(self.rondel.port, timeout=15) as c:
            c.request("GET", "/silent-after-head")
            status, headers, _ = c.read_head()
            self.assertEqual(status, 200)
            self.assertEqual(headers.get("content-length"), "100")
            with self.assertRaises(ConnectionError):
                c._read_exact(100, time.monotonic() + 10)
        # Cut by the 2 s inactivity timeout, not by the backend closing after its silence.
        self.assertLess(time.monotonic() - t0, SILENCE - 1.0)


class BodyTimeoutPausedByBackpressure(RondelTestCase):
    @classmethod
    def start_backends(cls):
        cls.backend = ConnBackend(serve, timeout=20)
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config([{"address": cls.backend.address}],
                           listener={"body_timeout": "1s"}, pool={"retries": 0})

    def test_backend_stall_is_not_a_client_408(self):
        size = 32 << 20  # far more than the socket buffers between rondel and the backend hold
        with HttpConn(self.rondel.port, timeout=20) as c:
            c.send(b"POST /slow-reader HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % size)
            errors = []

            def upload():
                try:
                    block = b"x" * (1 << 20)
                    for _ in range(size >> 20):
                        c.sock.sendall(block)
                except OSError as e:
                    errors.append(e)

            t = threading.Thread(target=upload, daemon=True)
            t.start()
            status, _, body = c.read_response()
            t.join(20)
        self.assertEqual(status, 200)
        self.assertEqual(body, b"%d" % size)
        self.assertEqual(errors, [])

    def test_client_stall_mid_spliced_upload_is_408(self):
        # 256 KiB of a 1 MiB body, then nothing: the rest of the body is spliced to the backend,
        # and the relay waiting on the client runs the body timeout.
        with HttpConn(self.rondel.port, timeout=20) as c:
            c.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (1 << 20))
            c.send(b"y" * (256 << 10))
            status, _, _ = c.read_response()
        self.assertEqual(status, 408)


if __name__ == "__main__":
    main()
