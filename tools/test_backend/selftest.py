#!/usr/bin/env python3
"""Self-test of rondel-test-backend over raw sockets: python3 selftest.py PATH/TO/rondel-test-backend

Processes, ports and the HTTP reader come from tools/pylib/rondel_support."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from rondel_support import daemons, httpio, ledger, procfs, procs  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "rondel-test-backend"
FAILED = []
REGISTRY = procs.ProcessRegistry()


def start(*args):
    """A test backend with `args` (one listener per --and group); (backend, first port)."""
    b = daemons.TestBackendProcess(BIN, list(args), REGISTRY)
    return b, b.port


def conn(port, timeout=5):
    return httpio.HttpConn(port, timeout=timeout)


def get(port, target, headers=None):
    """(status, headers, body) of one GET with Host: t first, then `headers`."""
    return httpio.exchange(port, "GET", target, headers={"Host": "t", **(headers or {})})


def check(name, cond, info=""):
    print("%-4s %s %s" % ("ok" if cond else "FAIL", name, info if not cond else ""))
    if not cond:
        FAILED.append(name)


def stats(port):
    return json.loads(get(port, "/_stats")[2])


def output(b):
    return "\n".join(b.out.lines)


def pipelining_and_uploads(b, port):
    # Pipelining: answers come in request order even when an earlier one is slower.
    c = conn(port)
    t0 = time.monotonic()
    c.send(b"GET /one?delay=200 HTTP/1.1\r\nHost: t\r\n\r\n"
           b"GET /two HTTP/1.1\r\nHost: t\r\n\r\n"
           b"GET /three?size=5 HTTP/1.1\r\nHost: t\r\n\r\n")
    got = [c.read_response()[2] for _ in range(3)]
    dt = time.monotonic() - t0
    check("pipelining order", got == [b"b1\n", b"b1\n", b"b1\nb1"], got)
    # Not before the delay (noise only lengthens dt; the connection's 5 s timeout bounds it above).
    check("delay applied", dt >= 0.2 - 0.002, dt)

    # Chunked upload split across writes, with checksum.
    data = os.urandom(300000)
    c.send(b"POST /up?checksum=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, len(data), 70000):
        piece = data[i:i + 70000]
        c.send(b"%x\r\n" % len(piece) + piece[:100])
        time.sleep(0.01)  # pacing: the chunk arrives in two reads (not a synchronisation)
        c.send(piece[100:] + b"\r\n")
    c.send(b"0\r\n\r\n")
    st, h, body = c.read_response()
    check("chunked upload bytes", h["x-request-bytes"] == str(len(data)), h)
    check("chunked upload crc", h["x-request-crc32"] == "%08x" % zlib.crc32(data), h)
    c.close()

    # Large Content-Length upload and large chunked download stream without buffering.
    c = conn(port, 30)
    n = 64 << 20
    c.send(b"PUT /big HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % n)
    block = b"x" * (1 << 20)
    for _ in range(n >> 20):
        c.send(block)
    st, h, body = c.read_response()
    check("large upload", h["x-request-bytes"] == str(n), h)
    c.send(b"GET /dl?size=%d&chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n" % (20 << 20))
    st, h, body = c.read_response()
    check("large chunked download", len(body) == 20 << 20 and body[:6] == b"b1\nb1\n", len(body))
    rss = procfs.rss_kib([b.pid])
    check("rss stays small", rss < 20000, "%d kB" % rss)
    c.close()


def fail_modes(port):
    st, h, body = get(port, "/x?fail=status-500")
    check("status-500", st == 500)
    st, h, body = get(port, "/x?status=503&size=0")
    check("status override", st == 503 and h["content-length"] == "0")
    with conn(port) as c:
        c.send(b"GET /x?fail=close-before-response HTTP/1.1\r\nHost: t\r\n\r\n")
        check("close-before-response", c.closed_by_peer(5) and c.buf == b"", c.buf)
    with conn(port) as c:
        c.send(b"POST /x?fail=reset-after-request HTTP/1.1\r\nHost: t\r\nX-Request-Id: rst-1\r\n"
               b"Content-Length: 5\r\n\r\n")
        try:
            r = c.sock.recv(100)  # the raw socket: HttpConn reads a reset as a close
            check("reset-after-request", False, r)
        except ConnectionResetError:
            check("reset-after-request", True)
    with conn(port) as c:
        c.send(b"GET /x?fail=truncate-body&size=100 HTTP/1.1\r\nHost: t\r\n\r\n")
        try:
            c.read_response()
            check("truncate-body", False)
        except ConnectionError as e:
            check("truncate-body", "after 50 of 100" in str(e), e)
    with conn(port) as c:
        c.send(b"GET /x?fail=hang HTTP/1.1\r\nHost: t\r\n\r\n")
        try:
            c.read_head(timeout=0.5)
            check("hang", False)
        except socket.timeout:
            check("hang", stats(port)["in_flight"] == 1)
    check("hang closed frees in_flight",
          wait_for_stats(port, lambda st: st["in_flight"] == 0) is not None)
    with conn(port) as c:
        c.send(b"GET /x?fail=bad-framing HTTP/1.1\r\nHost: t\r\n\r\n")
        st, h, raw = c.read_head()
        check("bad-framing", "content-length" in h and "transfer-encoding" in h)
    with conn(port) as c:
        c.send(b"GET /x?fail=extra-bytes HTTP/1.1\r\nHost: t\r\n\r\n")
        st, h, body = c.read_response()
        while len(c.buf) < 10 and c.read_more():
            pass
        check("extra-bytes", body == b"b1\n" and c.buf.startswith(b"GARBAGE"), c.buf)


def wait_for_stats(port, ok, timeout=5.0):
    """The backend's /_stats once ok(stats) holds, or None after `timeout` s."""
    try:
        return procs.wait_until(lambda: (lambda st: st if ok(st) else None)(stats(port)),
                                timeout=timeout, what="the backend's counters")
    except AssertionError:
        return None


def control_endpoints(port, ledger_path):
    # Echo shows the raw head; control endpoints are not counted; ledger lines.
    st, h, body = get(port, "/_echo", {"X-Forwarded-For": "1.2.3.4"})
    check("echo", body == b"GET /_echo HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n", body)
    before = stats(port)["requests"]
    get(port, "/healthz")
    check("control not counted", stats(port)["requests"] == before)
    check("healthz", get(port, "/healthz")[0] == 200)
    get(port, "/_health?fail=1")
    check("health fail", get(port, "/healthz")[0] == 503)
    get(port, "/_health?fail=0")
    check("health restore", get(port, "/healthz")[0] == 200)
    with conn(port) as c:
        c.send(b"POST /pay HTTP/1.1\r\nHost: t\r\nX-Request-Id: req-42\r\nContent-Length: 3\r\n\r\nabc")
        c.read_response()
    entries = ledger.read_ledger(ledger_path)
    check("ledger", ("req-42", "POST", "/pay", 3) in entries
          and ("rst-1", "POST", "/x?fail=reset-after-request", 0) in entries, entries[-3:])
    get(port, "/_reset")
    st = stats(port)
    check("reset", st["requests"] == 0 and st["bytes_in"] == 0, st)


def connection_handling(port):
    # Connection: close, HTTP/1.0, bad request, Expect: 100-continue.
    with conn(port) as c:
        c.send(b"GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /ignored HTTP/1.1\r\n\r\n")
        st, h, body = c.read_response()
        check("connection close", h.get("connection") == "close" and c.closed_by_peer(5)
              and c.buf == b"", (h, c.buf))
    with conn(port) as c:
        c.send(b"GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        st, h, body = c.read_response()
        check("http/1.0 keep-alive", h.get("connection") == "keep-alive", h)
    with conn(port) as c:
        c.send(b"GET /c HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        st, h, body = c.read_response()
        check("bad request 400", st == 400, body)
    with conn(port) as c:
        c.send(b"POST /e HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        st, h, body = c.read_response(skip_interim=False)
        c.send(b"hi")
        st2, h2, body2 = c.read_response()
        check("100-continue", st == 100 and st2 == 200 and h2["x-request-bytes"] == "2")

    # Clients vanishing mid-body and mid-delay do not hurt.
    with conn(port) as c:
        c.send(b"POST /gone HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nabc")
    with conn(port) as c:
        c.send(b"GET /slow?delay=100 HTTP/1.1\r\nHost: t\r\n\r\n")
    st = wait_for_stats(port, lambda st: st["in_flight"] == 0 and st["connections_open"] == 1)
    check("vanishing clients", st is not None, stats(port))


def cache_model():
    b, port = start("--name", "c", "--cache-objects", "2", "--miss-delay-ms", "100", "--chunked")
    seq = []
    for path in ["/a", "/a", "/b", "/c", "/a"]:
        t0 = time.monotonic()
        st, h, body = get(port, path)
        # A miss waits its 100 ms (a bound noise cannot break: it only lengthens the wait). How
        # fast a hit is is not timed: a busy machine can delay any answer by 100 ms; the header
        # and the hit/miss counters below say which it was.
        seq.append((h["x-cache"], h["x-cache"] == "HIT" or time.monotonic() - t0 >= 0.1 - 0.002))
    check("lru cache", seq == [("MISS", True), ("HIT", True), ("MISS", True), ("MISS", True),
                               ("MISS", True)], seq)
    st = stats(port)
    check("hit/miss counters", st["hits"] == 1 and st["misses"] == 4, st)
    check("--chunked", h.get("transfer-encoding") == "chunked" and body == b"c\n")
    check("SIGINT exit 0", b.stop(signal.SIGINT) and b.proc.returncode == 0)


def ranges():
    # One range of a synthetic object: 206, the object's bytes at that offset, Content-Range;
    # past the end 416; several ranges or another unit: the whole body. Block cache: a range
    # counts one hit or miss per block it touches; bytes_out counts body bytes sent.
    b, port = start("--name", "r", "--size", "100", "--cache-objects", "2", "--cache-block", "10")
    whole = get(port, "/o")[2]
    st, h, body = get(port, "/o", {"Range": "bytes=15-24"})
    check("range: 206 slice", st == 206 and body == whole[15:25]
          and h.get("content-range") == "bytes 15-24/100", (st, h, body))
    st, h, body = get(port, "/o", {"Range": "bytes=90-"})
    check("range: open end", st == 206 and body == whole[90:], (st, body))
    st, h, body = get(port, "/o", {"Range": "bytes=-5"})
    check("range: suffix", st == 206 and body == whole[95:], (st, body))
    st, h, _ = get(port, "/o", {"Range": "bytes=100-"})
    check("range: past the end 416", st == 416 and h.get("content-range") == "bytes */100", (st, h))
    for value in ("bytes=0-1,5-6", "items=0-1", "bytes=9-3"):
        st, _, body = get(port, "/o", {"Range": value})
        check("range: %s ignored" % value, st == 200 and body == whole, (st, body))
    get(port, "/_reset")
    get(port, "/p", {"Range": "bytes=5-14"})   # blocks 0, 1: two misses
    get(port, "/p", {"Range": "bytes=10-19"})  # block 1: a hit
    st = stats(port)
    check("range: block cache counts blocks", st["misses"] == 2 and st["hits"] == 1, st)
    check("range: bytes_out", st["bytes_out"] == 20, st)
    b.stop()


def and_groups():
    # --and: several backends in one process, each with its own name, ledger and counters.
    ledgers = [tempfile.NamedTemporaryFile(delete=False).name for _ in range(2)]
    b, _ = start("--name", "m1", "--ledger", ledgers[0], "--and",
                 "--name", "m2", "--ledger", ledgers[1], "--size", "4")
    got = [(get(port, "/k")[1]["x-backend"], get(port, "/k")[2]) for port in b.ports]
    check("--and: each backend its own name and options", got == [("m1", b"m1\n"), ("m2", b"m2\nm")], got)
    get(b.ports[1], "/only-m2")
    counts = [stats(port)["requests"] for port in b.ports]
    check("--and: separate counters", counts == [2, 3], counts)
    entries = [ledger.read_ledger(path) for path in ledgers]
    check("--and: separate ledgers", len(entries[0]) == 2 and ("-", "GET", "/only-m2", 0) in entries[1]
          and all(e[2] != "/only-m2" for e in entries[0]), entries)
    check("--and: SIGTERM stops all, exit 0", b.stop() and b.proc.returncode == 0, output(b))
    for path in ledgers:
        os.unlink(path)
    bad = subprocess.run([BIN, "--name", "ok", "--and", "--size", "nope"], capture_output=True, text=True, timeout=5)
    check("--and: a bad option in a later group is refused", bad.returncode == 2
          and "bad --size 'nope'" in bad.stderr and "listening" not in bad.stdout, bad)
    for argv in (["--name", "ok", "--and"], ["--and", "--name", "ok"], ["--name", "a", "--and", "--and", "--name", "b"]):
        bad = subprocess.run([BIN, *argv], capture_output=True, text=True, timeout=5)
        check("--and: an empty group is refused %s" % argv, bad.returncode == 2
              and "--and needs a backend's options on both sides" in bad.stderr and bad.stdout == "", bad)


def main():
    ledger_path = tempfile.NamedTemporaryFile(delete=False).name
    try:
        b, port = start("--name", "b1", "--ledger", ledger_path)
        pipelining_and_uploads(b, port)
        fail_modes(port)
        control_endpoints(port, ledger_path)
        connection_handling(port)
        check("SIGTERM exit 0", b.stop() and b.proc.returncode == 0, output(b))
        cache_model()
        ranges()
        and_groups()
    finally:
        REGISTRY.kill_all()
        os.unlink(ledger_path)
    print("FAILED: %s" % FAILED if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


main()
