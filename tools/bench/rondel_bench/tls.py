"""The TLS pass: rondel, HAProxy (`bind ... ssl crt`) and nginx (`listen ... ssl`), one
worker/thread each on core 0, the same ECDSA P-256 certificate, in front of the same backends,
measured in turn (the order rotated each rep):

- keep-alive HTTP/1.1 over TLS: wrk with load.lua (req/s, proxy CPU per request, p99);
- the full-handshake rate: `openssl s_time -new`, HS_CLIENTS processes at once on core 1, each
  connection a new session and one `GET /obj/1 HTTP/1.0` (handshakes/s, proxy CPU per one);
- the resumed-handshake rate: the same with `s_time -reuse` (every connection after the first
  of each process resumes its session: TLS 1.3 tickets);
- idle TLS connection memory: the proxy's RSS growth per connection between --tls-idle / 5 and
  --tls-idle keep-alive TLS connections that each made one request (after a warm-up).

wrk cannot give the full-handshake rate: it keeps the session across reconnects (SSL_clear), so
`Connection: close` mixes full and resumed handshakes (about half each against rondel).
"""

import os
import re
import resource
import socket
import ssl
import subprocess
import time
from collections import defaultdict

from rondel_support import procfs
from rondel_support.procfs import CLK_TCK

from .context import CLIENT_CORE, log
from .idle import raise_client_nofile
from .load import measured_run
from .proxies import HAProxy, Nginx, Rondel, start_held
from .report import fmt_range, med, ratio

HS_CLIENTS = 4  # s_time processes at once: enough to keep a proxy's core busy
IDLE_WARM = 200  # TLS connections opened and closed before the idle ones
HS_MODES = (("full", "-new"), ("resumed", "-reuse"))


def make_cert(d):
    """(cert, key, both): a self-signed ECDSA P-256 certificate for bench.test, its key, and both
    in one file (HAProxy's `crt`)."""
    key, cert = os.path.join(d, "bench.key"), os.path.join(d, "bench.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=bench.test", "-addext", "subjectAltName=DNS:bench.test"],
                   check=True, capture_output=True, timeout=30)
    both = os.path.join(d, "bench-both.pem")
    with open(both, "w") as f:
        f.write(open(cert).read() + open(key).read())
    return cert, key, both


def client_context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def wait_tls(port, alive, timeout=10.0):
    """Waits until a TLS handshake and a GET on 127.0.0.1:port get a response head."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server on port {port} exited before it answered")
        try:
            with client_context().wrap_socket(socket.create_connection(
                    ("127.0.0.1", port), timeout=2)) as s:
                s.sendall(b"GET /obj/1 HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n")
                if s.recv(4096).startswith(b"HTTP/1."):
                    return
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise RuntimeError(f"no TLS answer on 127.0.0.1:{port} within {timeout}s ({last})")


class TlsProxy:
    """Mixed into a proxy class: https URL, and a start that waits for a TLS answer. `cert`,
    `key` and `both` are set by the pass (tls_pass) before any is started."""
    cert = key = both = ""

    def url(self):
        return f"https://127.0.0.1:{self.port}/"


# The one TLS 1.3 suite every proxy is given, so the passes compare proxies, not ciphers: left to
# their defaults HAProxy (server preference, OpenSSL's order) picks AES-256-GCM, rondel (Mozilla
# intermediate order) AES-128-GCM, and wrk and s_time offer both.
TLS13_SUITE = "TLS_AES_128_GCM_SHA256"


class TlsRondel(TlsProxy, Rondel):
    def config_text(self, backends, bounded, admin):
        text = super().config_text(backends, bounded, admin)
        tls = (f"    tls:\n      ciphersuites: {TLS13_SUITE}\n      certificates:\n"
               f"        - {{ cert: {self.cert}, key: {self.key} }}\n")
        return text.replace("    pool: p\n", "    pool: p\n" + tls, 1)

    def start(self, backends, bounded, admin, prefix):
        # daemons.Rondel learns the ports from the log and does not speak HTTP to them.
        super().start(backends, bounded, admin, prefix)
        wait_tls(self.port, alive=lambda: self.proc.poll() is None)


def _start_tls_held(proxy, backends, bounded, prefix):
    """start_held for a TLS listener: the process on a held port 0 socket, waited on with TLS."""
    proxy.proc, proxy.port = start_held(proxy.ctx.registry,
                                        lambda held: proxy.argv(backends, bounded, held), prefix,
                                        os.path.join(proxy.dir, "stderr.txt"), proxy.name,
                                        wait=False)
    wait_tls(proxy.port, alive=lambda: proxy.proc.poll() is None)


class TlsHAProxy(TlsProxy, HAProxy):
    def argv(self, backends, bounded, held):
        argv, env = super().argv(backends, bounded, held)
        path = os.path.join(self.dir, "haproxy.cfg")
        with open(path) as f:
            conf = f.read()
        conf = conf.replace(f"    bind fd@{held.fd}\n",
                            f"    bind fd@{held.fd} ssl crt {self.both} ciphersuites "
                            f"{TLS13_SUITE}\n")
        self.write("haproxy.cfg", conf)
        return argv, env

    def start(self, backends, bounded, admin, prefix):
        _start_tls_held(self, backends, bounded, prefix)


class TlsNginx(TlsProxy, Nginx):
    def argv(self, backends, bounded, held):
        argv, env = super().argv(backends, bounded, held)
        path = os.path.join(self.dir, "nginx.conf")
        with open(path) as f:
            conf = f.read()
        conf = conf.replace(f"        listen 127.0.0.1:{held.port};\n",
                            f"        listen 127.0.0.1:{held.port} ssl;\n"
                            f"        ssl_certificate {self.cert};\n"
                            f"        ssl_certificate_key {self.key};\n"
                            # nginx 1.22's default is TLSv1 to TLSv1.2: without this line it
                            # ran the passes on TLS 1.2 while the others ran 1.3.
                            f"        ssl_protocols TLSv1.2 TLSv1.3;\n"
                            f"        ssl_conf_command Ciphersuites {TLS13_SUITE};\n")
        self.write("nginx.conf", conf)
        return argv, env

    def start(self, backends, bounded, admin, prefix):
        _start_tls_held(self, backends, bounded, prefix)


KINDS = (TlsRondel, TlsHAProxy, TlsNginx)
S_TIME_COUNT = re.compile(r"(\d+) connections in [\d.]+s;")
S_TIME_BYTES = re.compile(r"(\d+) bytes read per connection")


def s_time_result(outputs, wall, cpu_s):
    """Handshakes/s and proxy CPU per handshake from the outputs of s_time processes run
    together for `wall` seconds while the proxy used `cpu_s` CPU seconds."""
    conns, per_conn = 0, []
    for out in outputs:
        m = S_TIME_COUNT.search(out)
        if not m:
            raise RuntimeError(f"s_time gave no count: {out[-400:]}")
        conns += int(m.group(1))
        b = S_TIME_BYTES.search(out)
        per_conn.append(int(b.group(1)) if b else 0)
    return {"handshakes": conns, "hs_per_s": conns / wall,
            "cpu_us_per_hs": cpu_s * 1e6 / max(1, conns), "bytes_per_conn": min(per_conn)}


def proxy_cpu(proxy, fn):
    """(fn(), wall seconds, CPU seconds the proxy's processes used meanwhile, from /proc)."""
    out, wall, user, system = proxy_cpu_split(proxy, fn)
    return out, wall, user + system


def proxy_cpu_split(proxy, fn):
    """(fn(), wall seconds, user and system CPU seconds the proxy's processes used meanwhile)."""
    pids = proxy.pids()
    (u0, s0), w0 = procfs.cpu_ticks_split(pids), time.time()
    out = fn()
    u1, s1 = procfs.cpu_ticks_split(pids)
    return out, time.time() - w0, (u1 - u0) / CLK_TCK, (s1 - s0) / CLK_TCK


def handshakes(ctx, proxy, mode, duration, core=CLIENT_CORE, warm_up=True):
    """HS_CLIENTS `openssl s_time MODE` processes at once for `duration` s against proxy, pinned
    to `core` (None: unpinned); after a 1 s warm-up unless not `warm_up`."""
    def run(secs):
        argv = ctx.prefix(core) + ["openssl", "s_time", "-connect",
                                          f"127.0.0.1:{proxy.port}", mode, "-www", "/obj/1",
                                          "-time", str(secs)]
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for _ in range(HS_CLIENTS)]
        return [p.communicate(timeout=secs + 60)[0] for p in procs]
    if warm_up:
        run(1)
    outputs, wall, cpu_s = proxy_cpu(proxy, lambda: run(duration))
    return s_time_result(outputs, wall, cpu_s)


def tls_connect(port, ctx, i):
    """One keep-alive TLS connection that made one request and read its response head."""
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
    s.sendall(b"GET /obj/%d HTTP/1.1\r\nHost: bench.test\r\n\r\n" % i)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError(f"port {port}: connection closed before a response")
        data += chunk
    return s


def settled_rss(pids, interval=0.2, timeout=3.0):
    last = procfs.rss_kib(pids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = procfs.rss_kib(pids)
        if now == last:
            break
        last = now
    return last


def idle_tls(proxy, n, warm=IDLE_WARM):
    """Bytes of RSS per idle TLS connection, as the idle pass measures plain ones: after IDLE_WARM
    connections opened and closed (first-use allocations, pools), the RSS growth between n/5 and
    n connections held open, over the 4n/5 connections in between."""
    ctx = client_context()
    held = []
    try:
        for s in [tls_connect(proxy.port, ctx, i) for i in range(warm)]:
            s.close()
        held += [tls_connect(proxy.port, ctx, i) for i in range(n // 5)]
        before = settled_rss(proxy.pids())
        held += [tls_connect(proxy.port, ctx, i) for i in range(n // 5, n)]
        return {"idle_bytes_per_conn": (settled_rss(proxy.pids()) - before) * 1024 / (n - n // 5),
                "idle_conns": n}
    finally:
        for s in held:
            s.close()


def tls_pass(ctx, make_backends):
    """{proxy: [result per rep]}: each result has the keep-alive run (wrk's figures), the
    full and resumed handshake figures and the idle memory per connection."""
    opts = ctx.opts
    d = os.path.join(ctx.workdir, "tls")
    os.makedirs(d, exist_ok=True)
    TlsProxy.cert, TlsProxy.key, TlsProxy.both = make_cert(d)
    old_nofile = raise_client_nofile(opts.tls_idle)
    results = defaultdict(list)
    b = make_backends()
    try:
        for rep in range(opts.reps):
            order = KINDS[rep % len(KINDS):] + KINDS[:rep % len(KINDS)]
            for kind in order:
                p = kind(ctx, b, idle=opts.tls_idle)
                try:
                    r = {"keepalive": measured_run(ctx, p, 0, opts.duration, seed=rep + 1,
                                                   backend_pids=b.pids())}
                    for name, mode in HS_MODES:
                        r[name] = handshakes(ctx, p, mode, opts.duration)
                    r.update(idle_tls(p, opts.tls_idle))
                finally:
                    p.stop()
                results[p.name].append(r)
                log(_run_line(rep, p.name, r))
    finally:
        b.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, old_nofile)
    return dict(results)


def _run_line(rep, name, r):
    k = r["keepalive"]
    return (f"  tls rep {rep + 1} {name:8} keep-alive {k['rps']:,.0f} req/s "
            f"{k['cpu_us_per_req']:.1f} us/req; full {r['full']['hs_per_s']:,.0f}/s "
            f"{r['full']['cpu_us_per_hs']:.0f} us; resumed {r['resumed']['hs_per_s']:,.0f}/s "
            f"{r['resumed']['cpu_us_per_hs']:.0f} us; idle {r['idle_bytes_per_conn']:,.0f} B/conn")


# The report's figures: (column, how to get it from one rep's result, format).
FIGURES = (
    ("keep-alive req/s", lambda r: r["keepalive"]["rps"], "{:,.0f}"),
    ("CPU µs/req", lambda r: r["keepalive"]["cpu_us_per_req"], "{:.1f}"),
    ("p99 ms", lambda r: r["keepalive"]["p99_us"] / 1000, "{:.2f}"),
    ("full handshakes/s", lambda r: r["full"]["hs_per_s"], "{:,.0f}"),
    ("CPU µs/full", lambda r: r["full"]["cpu_us_per_hs"], "{:.0f}"),
    ("full per core-second", lambda r: 1e6 / r["full"]["cpu_us_per_hs"], "{:,.0f}"),
    ("resumed/s", lambda r: r["resumed"]["hs_per_s"], "{:,.0f}"),
    ("CPU µs/resumed", lambda r: r["resumed"]["cpu_us_per_hs"], "{:.0f}"),
    ("idle B/conn", lambda r: r["idle_bytes_per_conn"], "{:,.0f}"),
)

# The targets, rondel against HAProxy in the same run: (what, figure index in
# FIGURES, limit, higher is better).
# The measured handshake rate is bounded by the client core when the proxies cost less than the
# clients (s_time verifies the certificate and makes its own key share), so the rate one proxy
# core would sustain, 1 / CPU per handshake, is the proxy's figure.
TARGETS = (
    ("CPU per request ≤ 0.9 × HAProxy", 1, 0.9, False),
    ("full handshakes/s ≥ HAProxy", 3, 1.0, True),
    ("full handshakes per core-second ≥ HAProxy", 5, 1.0, True),
    ("idle TLS connection memory ≤ HAProxy", 8, 1.0, False),
)


def medians(results):
    """{proxy: [median of each FIGURES entry]}."""
    return {name: [med([get(r) for r in runs]) for _, get, _ in FIGURES]
            for name, runs in results.items()}


def tls_section(results, args):
    m = medians(results)
    ha = m.get("haproxy")
    out = ["## TLS termination", "",
           f"One worker/thread per proxy on core 0, the same ECDSA P-256 certificate, "
           f"{args.backends} backends and the clients on core 1. Keep-alive: wrk -t1 "
           f"-c{args.conns} over TLS 1.3 (load.lua). Handshakes: {HS_CLIENTS} `openssl s_time` "
           "at once, one `GET /obj/1 HTTP/1.0` per connection, `-new` (full) and `-reuse` "
           "(resumed: TLS 1.3 tickets). Idle: RSS growth per keep-alive TLS connection (one "
           f"request each) between {args.tls_idle // 5} and {args.tls_idle} held open, after "
           f"{IDLE_WARM} opened and closed. {args.duration}s × "
           f"{args.reps} reps, proxies in turn, the order rotated each rep; medians, (min–max) "
           "over reps; ratios to HAProxy's medians of the same run.", ""]
    out.append("| proxy | " + " | ".join(c for c, _, _ in FIGURES) + " |")
    out.append("|---|" + "---|" * len(FIGURES))
    for name, runs in results.items():
        out.append(f"| {name} | " + " | ".join(
            fmt_range([get(r) for r in runs], lambda x, f=f: f.format(x))
            for _, get, f in FIGURES) + " |")
    if ha:
        out += ["", "| ÷ HAProxy | " + " | ".join(c for c, _, _ in FIGURES) + " |",
                "|---|" + "---|" * len(FIGURES)]
        for name in m:
            out.append(f"| {name} | " + " | ".join(ratio(x, y) for x, y in zip(m[name], ha))
                       + " |")
    out += ["", "Targets (issue 15), rondel ÷ HAProxy in this run:", "",
            "| target | rondel ÷ HAProxy | met |", "|---|---|---|"]
    for what, i, limit, higher in TARGETS:
        if not ha or "rondel" not in m:
            out.append(f"| {what} | n/a | n/a |")
            continue
        x = m["rondel"][i] / ha[i]
        met = x >= limit if higher else x <= limit
        out.append(f"| {what} | {x:.2f} | {'yes' if met else 'no'} |")
    return "\n".join(out) + "\n"
