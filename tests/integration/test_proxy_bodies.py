"""Proxy data path, large bodies: 128 MiB up (Content-Length and chunked, CRC-32 checked by the
backend) and down (Content-Length and chunked, slow reader included) with rondel's memory flat.

Memory bound: rondel moves bodies through 16 KiB pooled buffers, one per direction and side, so
an exchange holds well under 1 MiB whatever the body size. Allowing for allocator noise and the
growth of the buffer pool's free list, we accept 8 MiB of RSS growth over the idle baseline
while 128 MiB streams through: buffering even a sixteenth of one body would exceed that."""
import os
import threading
import time
import zlib

from harness import HttpConn, RondelTestCase, RssWatch, main

BIG = 128 * 1024 * 1024
RSS_GROWTH_KIB = 8 * 1024


def pattern(n):
    """A random 1 MiB block and how to repeat it to make n bytes: (block, full blocks, rest)."""
    block = os.urandom(1 << 20)
    full, rest = divmod(n, len(block))
    return block, full, rest


class ProxyBodies(RondelTestCase):
    backend_names = [f"big{i}" for i in range(2)]
    backend_args = ("--checksum",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Warm up the pools and paths once, then take the baseline.
        for _ in range(3):
            with HttpConn(cls.rondel.port) as c:
                c.request("POST", "/warm", body=b"w" * 200000)
                c.read_response()
                c.request("GET", "/warm?size=1000000")
                c.read_response()
        cls.rondel.wait_idle()
        cls.baseline = cls.rondel.rss_kib()
        cls.block, cls.full, cls.rest = pattern(BIG)
        crc = 0
        for _ in range(cls.full):
            crc = zlib.crc32(cls.block, crc)
        cls.crc = zlib.crc32(cls.block[:cls.rest], crc)


    def tearDown(self):
        self.rondel.wait_idle()

    def check_rss(self, peak, what):
        growth = peak - self.baseline
        print(f"{what}: rss baseline {self.baseline} KiB, peak {peak} KiB, growth {growth} KiB",
              flush=True)
        self.assertLess(growth, RSS_GROWTH_KIB, f"{what}: rondel's RSS grew by {growth} KiB")

    def upload(self, chunked):
        watch = RssWatch(self.rondel.rss_kib)
        with HttpConn(self.rondel.port, timeout=60) as c:
            if chunked:
                c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in range(self.full):
                    c.send(b"%x\r\n" % len(self.block) + self.block + b"\r\n")
                if self.rest:
                    c.send(b"%x\r\n" % self.rest + self.block[:self.rest] + b"\r\n")
                c.send(b"0\r\n\r\n")
            else:
                c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % BIG)
                for _ in range(self.full):
                    c.send(self.block)
                c.send(self.block[:self.rest])
            status, h, _ = c.read_response(timeout=60)
        peak = watch.stop()
        self.assertEqual(status, 200)
        self.assertEqual(int(h["x-request-bytes"]), BIG)
        self.assertEqual(int(h["x-request-crc32"], 16), self.crc)
        self.check_rss(peak, "upload chunked" if chunked else "upload length")

    def download(self, chunked, slow=False):
        watch = RssWatch(self.rondel.rss_kib)
        total = [0]
        slept = [0.0]

        def sink(b):
            total[0] += len(b)
            if slow and total[0] < 8 * 1024 * 1024 and slept[0] < 1.0:
                time.sleep(0.01)  # a slow reader at first: backpressure must hold the backend
                slept[0] += 0.01

        with HttpConn(self.rondel.port, timeout=60) as c:
            c.request("GET", f"/down?size={BIG}&chunked={1 if chunked else 0}")
            status, h, _ = c.read_response(timeout=60, sink=sink)
        peak = watch.stop()
        self.assertEqual(status, 200)
        self.assertEqual(total[0], BIG)
        if chunked:
            self.assertEqual(h.get("transfer-encoding"), "chunked")
        else:
            self.assertEqual(int(h["content-length"]), BIG)
        self.check_rss(peak, f"download {'chunked' if chunked else 'length'}{' slow' if slow else ''}")

    def test_upload_content_length(self):
        self.upload(chunked=False)

    def test_upload_chunked(self):
        self.upload(chunked=True)

    def test_download_content_length(self):
        self.download(chunked=False)

    def test_download_chunked_slow_reader(self):
        self.download(chunked=True, slow=True)

    def test_many_parallel_medium_bodies(self):
        # 16 connections each moving 8 MiB up and 8 MiB down at once.
        errors = []
        n = 8 * 1024 * 1024
        body = self.block * 8

        def worker(i):
            try:
                with HttpConn(self.rondel.port, timeout=60) as c:
                    c.request("POST", f"/par/{i}", body=body)
                    s, h, _ = c.read_response(timeout=60)
                    if s != 200 or int(h["x-request-bytes"]) != n:
                        errors.append((i, s))
                    got = [0]
                    c.request("GET", f"/par/{i}?size={n}")
                    s, _, _ = c.read_response(timeout=60, sink=lambda b: got.__setitem__(
                        0, got[0] + len(b)))
                    if s != 200 or got[0] != n:
                        errors.append((i, s, got[0]))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append((i, repr(e)))

        watch = RssWatch(self.rondel.rss_kib)
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=90)
        peak = watch.stop()
        self.assertEqual(errors, [])
        self.check_rss(peak, "16 parallel 8 MiB up+down")


if __name__ == "__main__":
    main()
