#!/usr/bin/env python3
"""Self-test of rondel-test-backend over raw sockets: python3 selftest.py PATH/TO/rondel-test-backend"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib

BIN = sys.argv[1] if len(sys.argv) > 1 else "rondel-test-backend"
FAILED = []


def start(*args):
    p = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert line[0] == "listening", line
    return p, int(line[1].rsplit(":", 1)[1])


def eventually(predicate, timeout=5.0):
    """Polls predicate() until it holds (True) or `timeout` passes (False): for a state the
    backend reaches on its own loop, such as a freed in-flight slot after a client left."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def conn(port, timeout=5):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    return s


def read_response(s, buf=b""):
    """Reads one response; returns (status, headers, body, rest). Body follows CL or chunked."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError("eof in head: %r" % buf)
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = b""
    if "transfer-encoding" in headers:
        while True:
            while b"\r\n" not in buf:
                buf += s.recv(65536)
            size_line, buf = buf.split(b"\r\n", 1)
            n = int(size_line, 16)
            while len(buf) < n + 2:
                d = s.recv(65536)
                if not d:
                    raise EOFError("eof in chunk")
                buf += d
            body += buf[:n]
            buf = buf[n + 2:]
            if n == 0:
                break
    elif "content-length" in headers:
        n = int(headers["content-length"])
        while len(buf) < n:
            d = s.recv(1 << 20)
            if not d:
                raise EOFError("eof in body after %d of %d" % (len(buf), n))
            buf += d
        body, buf = buf[:n], buf[n:]
    return status, headers, body, buf


def get(port, target, extra=""):
    s = conn(port)
    s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (target, extra)).encode())
    r = read_response(s)
    s.close()
    return r


def check(name, cond, info=""):
    print("%-4s %s %s" % ("ok" if cond else "FAIL", name, info if not cond else ""))
    if not cond:
        FAILED.append(name)


def stats(port):
    return json.loads(get(port, "/_stats")[2])


def main():
    ledger = tempfile.NamedTemporaryFile(delete=False).name
    p, port = start("--name", "b1", "--ledger", ledger)

    # Pipelining: answers come in request order even when an earlier one is slower.
    s = conn(port)
    t0 = time.monotonic()
    s.sendall(b"GET /one?delay=200 HTTP/1.1\r\nHost: t\r\n\r\n"
              b"GET /two HTTP/1.1\r\nHost: t\r\n\r\n"
              b"GET /three?size=5 HTTP/1.1\r\nHost: t\r\n\r\n")
    rest = b""
    got = []
    for _ in range(3):
        st, h, body, rest = read_response(s, rest)
        got.append(body)
    dt = time.monotonic() - t0
    check("pipelining order", got == [b"b1\n", b"b1\n", b"b1\nb1"], got)
    # Not before the delay (noise only lengthens dt; the socket's 5 s timeout bounds it above).
    check("delay applied", dt >= 0.2 - 0.002, dt)

    # Chunked upload split across writes, with checksum.
    data = os.urandom(300000)
    s.sendall(b"POST /up?checksum=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, len(data), 70000):
        piece = data[i:i + 70000]
        s.sendall(b"%x\r\n" % len(piece) + piece[:100])
        time.sleep(0.01)
        s.sendall(piece[100:] + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    st, h, body, rest = read_response(s, rest)
    check("chunked upload bytes", h["x-request-bytes"] == str(len(data)), h)
    check("chunked upload crc", h["x-request-crc32"] == "%08x" % zlib.crc32(data), h)
    s.close()

    # Large Content-Length upload and large chunked download stream without buffering.
    s = conn(port, 30)
    n = 64 << 20
    s.sendall(b"PUT /big HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % n)
    block = b"x" * (1 << 20)
    for _ in range(n >> 20):
        s.sendall(block)
    st, h, body, rest = read_response(s)
    check("large upload", h["x-request-bytes"] == str(n), h)
    s.sendall(b"GET /dl?size=%d&chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n" % (20 << 20))
    st, h, body, rest = read_response(s, rest)
    check("large chunked download", len(body) == 20 << 20 and body[:6] == b"b1\nb1\n", len(body))
    rss = int(open("/proc/%d/status" % p.pid).read().split("VmRSS:")[1].split()[0])
    check("rss stays small", rss < 20000, "%d kB" % rss)
    s.close()

    # Fail modes, per request.
    st, h, body, _ = get(port, "/x?fail=status-500")
    check("status-500", st == 500)
    st, h, body, _ = get(port, "/x?status=503&size=0")
    check("status override", st == 503 and h["content-length"] == "0")
    s = conn(port)
    s.sendall(b"GET /x?fail=close-before-response HTTP/1.1\r\nHost: t\r\n\r\n")
    check("close-before-response", s.recv(100) == b"")
    s = conn(port)
    s.sendall(b"POST /x?fail=reset-after-request HTTP/1.1\r\nHost: t\r\nX-Request-Id: rst-1\r\nContent-Length: 5\r\n\r\n")
    try:
        r = s.recv(100)
        check("reset-after-request", False, r)
    except ConnectionResetError:
        check("reset-after-request", True)
    s = conn(port)
    s.sendall(b"GET /x?fail=truncate-body&size=100 HTTP/1.1\r\nHost: t\r\n\r\n")
    try:
        read_response(s)
        check("truncate-body", False)
    except EOFError as e:
        check("truncate-body", "after 50 of 100" in str(e), e)
    s = conn(port, 0.5)
    s.sendall(b"GET /x?fail=hang HTTP/1.1\r\nHost: t\r\n\r\n")
    try:
        s.recv(100)
        check("hang", False)
    except socket.timeout:
        check("hang", stats(port)["in_flight"] == 1)
    s.close()
    check("hang closed frees in_flight", eventually(lambda: stats(port)["in_flight"] == 0))
    s = conn(port)
    s.sendall(b"GET /x?fail=bad-framing HTTP/1.1\r\nHost: t\r\n\r\n")
    st, h, body, rest = read_response(s)
    check("bad-framing", "content-length" in h and "transfer-encoding" in h)
    s = conn(port)
    s.sendall(b"GET /x?fail=extra-bytes HTTP/1.1\r\nHost: t\r\n\r\n")
    st, h, body, rest = read_response(s)
    while len(rest) < 10:
        rest += s.recv(100)
    check("extra-bytes", body == b"b1\n" and rest.startswith(b"GARBAGE"), rest)

    # Echo shows the raw head; control endpoints are not counted; ledger lines.
    st, h, body, _ = get(port, "/_echo", "X-Forwarded-For: 1.2.3.4\r\n")
    check("echo", body == b"GET /_echo HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n", body)
    before = stats(port)["requests"]
    get(port, "/healthz")
    check("control not counted", stats(port)["requests"] == before)
    check("healthz", get(port, "/healthz")[0] == 200)
    get(port, "/_health?fail=1")
    check("health fail", get(port, "/healthz")[0] == 503)
    get(port, "/_health?fail=0")
    check("health restore", get(port, "/healthz")[0] == 200)
    s = conn(port)
    s.sendall(b"POST /pay HTTP/1.1\r\nHost: t\r\nX-Request-Id: req-42\r\nContent-Length: 3\r\n\r\nabc")
    read_response(s)
    lines = open(ledger).read().splitlines()
    check("ledger", "req-42 POST /pay 3" in lines and "rst-1 POST /x?fail=reset-after-request 0" in lines, lines[-3:])
    get(port, "/_reset")
    st = stats(port)
    check("reset", st["requests"] == 0 and st["bytes_in"] == 0, st)

    # Connection: close, HTTP/1.0, bad request, Expect: 100-continue.
    s = conn(port)
    s.sendall(b"GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /ignored HTTP/1.1\r\n\r\n")
    st, h, body, rest = read_response(s)
    check("connection close", h.get("connection") == "close" and s.recv(100) == b"")
    s = conn(port)
    s.sendall(b"GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    st, h, body, rest = read_response(s)
    check("http/1.0 keep-alive", h.get("connection") == "keep-alive", h)
    s = conn(port)
    s.sendall(b"GET /c HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
    st, h, body, rest = read_response(s)
    check("bad request 400", st == 400, body)
    s = conn(port)
    s.sendall(b"POST /e HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
    st, h, body, rest = read_response(s)
    s.sendall(b"hi")
    st2, h2, body2, rest = read_response(s, rest)
    check("100-continue", st == 100 and st2 == 200 and h2["x-request-bytes"] == "2")

    # Clients vanishing mid-body and mid-delay do not hurt.
    s = conn(port)
    s.sendall(b"POST /gone HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nabc")
    s.close()
    s = conn(port)
    s.sendall(b"GET /slow?delay=100 HTTP/1.1\r\nHost: t\r\n\r\n")
    s.close()
    st = {}

    def settled():  # both clients gone: nothing in flight, only the /_stats connection open
        st.update(stats(port))
        return st["in_flight"] == 0 and st["connections_open"] == 1
    check("vanishing clients", eventually(settled), st)

    p.send_signal(signal.SIGTERM)
    check("SIGTERM exit 0", p.wait(5) == 0, p.stderr.read())

    # Cache model and fixed options.
    p, port = start("--name", "c", "--cache-objects", "2", "--miss-delay-ms", "100", "--chunked")
    seq = []
    for path in ["/a", "/a", "/b", "/c", "/a"]:
        t0 = time.monotonic()
        st, h, body, _ = get(port, path)
        # A miss waits its 100 ms (a bound noise cannot break: it only lengthens the wait). How
        # fast a hit is is not timed: a busy machine can delay any answer by 100 ms; the header
        # and the hit/miss counters below say which it was.
        seq.append((h["x-cache"], h["x-cache"] == "HIT" or time.monotonic() - t0 >= 0.1 - 0.002))
    check("lru cache", seq == [("MISS", True), ("HIT", True), ("MISS", True), ("MISS", True),
                               ("MISS", True)], seq)
    st = stats(port)
    check("hit/miss counters", st["hits"] == 1 and st["misses"] == 4, st)
    check("--chunked", h.get("transfer-encoding") == "chunked" and body == b"c\n")
    p.send_signal(signal.SIGINT)
    check("SIGINT exit 0", p.wait(5) == 0)
    os.unlink(ledger)

    # --and: several backends in one process, each with its own name, ledger and counters.
    ledgers = [tempfile.NamedTemporaryFile(delete=False).name for _ in range(2)]
    p = subprocess.Popen([BIN, "--name", "m1", "--ledger", ledgers[0], "--and",
                          "--name", "m2", "--ledger", ledgers[1], "--size", "4"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ports = [int(p.stdout.readline().split()[1].rsplit(":", 1)[1]) for _ in range(2)]
    got = [(get(port, "/k")[1]["x-backend"], get(port, "/k")[2]) for port in ports]
    check("--and: each backend its own name and options", got == [("m1", b"m1\n"), ("m2", b"m2\nm")], got)
    get(ports[1], "/only-m2")
    counts = [stats(port)["requests"] for port in ports]
    check("--and: separate counters", counts == [2, 3], counts)
    lines = [open(path).read().splitlines() for path in ledgers]
    check("--and: separate ledgers", len(lines[0]) == 2 and "- GET /only-m2 0" in lines[1]
          and all("/only-m2" not in l for l in lines[0]), lines)
    p.send_signal(signal.SIGTERM)
    check("--and: SIGTERM stops all, exit 0", p.wait(5) == 0, p.stderr.read())
    for path in ledgers:
        os.unlink(path)
    bad = subprocess.run([BIN, "--name", "ok", "--and", "--size", "nope"], capture_output=True, text=True, timeout=5)
    check("--and: a bad option in a later group is refused", bad.returncode == 2
          and "bad --size 'nope'" in bad.stderr and "listening" not in bad.stdout, bad)
    for argv in (["--name", "ok", "--and"], ["--and", "--name", "ok"], ["--name", "a", "--and", "--and", "--name", "b"]):
        bad = subprocess.run([BIN, *argv], capture_output=True, text=True, timeout=5)
        check("--and: an empty group is refused %s" % argv, bad.returncode == 2
              and "--and needs a backend's options on both sides" in bad.stderr and bad.stdout == "", bad)
    print("FAILED: %s" % FAILED if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


main()
