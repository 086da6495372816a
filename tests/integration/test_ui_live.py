"""The /ui live view: /api/ring's arcs agree with /api/route's owners, the page is served from
the binary, and it renders in headless Chromium to a screenshot that is not blank (PNG decoded
here with zlib, no imaging library needed).

Set RONDEL_UI_SCREENSHOT=FILE to keep the screenshot for a look.
"""
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import zlib

from harness import Backend, Rondel, http_get, main, make_config, wait_until

TWO32 = 1 << 32


def png_pixels(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    i = 0
    for _ in range(h):
        ft = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ft == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class LiveView(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.slow = Backend("slow", "--delay-ms", "2500")
        cls.backends = [cls.slow] + [Backend(f"b{i}") for i in range(1, 5)]
        cls.rondel = Rondel(make_config(cls.backends, pool={"points_per_weight": 160}))
        cls.stop_traffic = False
        cls.threads = []

    @classmethod
    def tearDownClass(cls):
        cls.stop_traffic = True
        for t in cls.threads:
            t.join(timeout=10)
        cls.rondel.stop()
        for b in cls.backends:
            b.stop()

    def test_ring_arcs_agree_with_route_owners(self):
        status, _, body = http_get(self.rondel.admin_port, "/api/ring?pool=p")
        self.assertEqual(status, 200)
        import json
        ring = json.loads(body)
        self.assertEqual(ring["algorithm"], "ring")
        self.assertTrue(ring["exact"])
        arcs = ring["arcs"]
        starts = [a[0] for a in arcs]
        self.assertEqual(starts[0], 0)
        self.assertEqual(starts, sorted(set(starts)))
        self.assertLess(starts[-1], TWO32)
        self.assertTrue(all(0 <= a[1] < len(ring["backends"]) for a in arcs))
        self.assertTrue(all(arcs[i][1] != arcs[i + 1][1] for i in range(len(arcs) - 1)))
        self.assertEqual(set(ring["backends"]), {b.address for b in self.backends})
        for i in range(60):
            route = self.rondel.route("p", f"/probe/{i}")
            top = int(route["hash"], 16) >> 32
            j = max(k for k, s in enumerate(starts) if s <= top)
            self.assertEqual(ring["backends"][arcs[j][1]], route["owner"], f"/probe/{i}")

    def test_ui_page_renders(self):
        status, headers, body = http_get(self.rondel.admin_port, "/ui")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/html"))
        self.assertIn(b"<canvas id=\"ring\"", body)
        self.assertIn(b"/api/pools", body)
        chromium = find_chromium()
        if chromium is None:
            self.skipTest("chromium not installed (Debian package chromium)")

        # Background traffic while the page loads: a hot key on the slow backend spills.
        key = next(k for k in (f"/hot/{i}" for i in range(500))
                   if self.rondel.route("p", k)["owner"] == self.slow.address)

        def traffic():
            deadline = time.monotonic() + 25
            while not self.stop_traffic and time.monotonic() < deadline:
                try:
                    http_get(self.rondel.port, key, timeout=5)
                except OSError:
                    pass
        for _ in range(6):
            t = threading.Thread(target=traffic, daemon=True)
            t.start()
            self.threads.append(t)
        wait_until(lambda: self.rondel.requests_in_flight() >= 6, timeout=15,
                   what="the six clients' requests in flight before the page loads")

        out_dir = tempfile.mkdtemp(prefix="rondel-ui-")
        shot = os.path.join(out_dir, "ui.png")
        profile = tempfile.mkdtemp(prefix="rondel-chromium-")
        try:
            r = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic", f"--user-data-dir={profile}",
                 f"--screenshot={shot}", "--window-size=1000,800",
                 "--virtual-time-budget=3000", f"http://127.0.0.1:{self.rondel.admin_port}/ui"],
                capture_output=True, timeout=45)
            self.assertTrue(os.path.exists(shot),
                            "no screenshot: " + r.stderr.decode("utf-8", "replace")[-2000:])
            keep = os.environ.get("RONDEL_UI_SCREENSHOT")
            if keep:
                shutil.copyfile(shot, keep)
            w, h, rows = png_pixels(shot)
            self.assertEqual((w, h), (1000, 800))
            colours = {}
            for row in rows[::2]:
                for px in row[::2]:
                    colours[px] = colours.get(px, 0) + 1
            total = sum(colours.values())
            background = max(colours.values())
            # A blank page is one colour; the ring alone brings five backend colours plus
            # anti-aliasing, and the tables bring text.
            self.assertGreater(len(colours), 50, f"{len(colours)} distinct colours")
            self.assertLess(background / total, 0.9, "the page is mostly one colour")
            # Each backend's palette colour appears (the ring's arcs).
            palette = [(0x4e, 0x9a, 0xf1), (0xf1, 0xa9, 0x4e), (0x5b, 0xd6, 0x8a),
                       (0xe9, 0x6b, 0xd0), (0xf4, 0xe0, 0x4d)]
            for c in palette:
                self.assertGreater(colours.get(c, 0), 50, f"colour {c} missing from the ring")
        finally:
            shutil.rmtree(profile, ignore_errors=True)
            shutil.rmtree(out_dir, ignore_errors=True)
            self.stop_traffic = True


if __name__ == "__main__":
    main()
