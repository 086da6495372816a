#!/usr/bin/env python3
"""TLS pass: rondel vs HAProxy (`bind ... ssl crt`) vs nginx (`listen ... ssl`), one worker each,
the same ECDSA P-256 certificate, one test backend behind all three, run side by side:

- keep-alive HTTP/1.1 over TLS (wrk): requests/s and the proxy's CPU per request;
- full-handshake rate (`openssl s_time -new`: a new TLS connection and one request each);
- resumed-handshake rate (`openssl s_time -reuse`: session resumption);
- idle TLS connection memory: RSS growth per connection for N keep-alive TLS connections that
  each made one request.

    tools/bench/tls_bench.py [--build-dir build] [--duration 5] [--idle 1000]

Proxies run on core 0, clients and the backend on core 1 (taskset), all on 127.0.0.1; every
process it starts is stopped by pid at the end. Prints one table (ratios to HAProxy) and writes
it, with the raw figures, to tools/bench/results/tls-STAMP.json. A smoke run on a shared machine
is noisy: compare figures of one run only. Needs haproxy, nginx, wrk and openssl (tools/bench/run.sh
installs the first three on Debian).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROCS = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pinned(core, argv):
    return (["taskset", "-c", str(core)] if shutil.which("taskset") else []) + argv


def start(argv, log, env=None):
    p = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    PROCS.append(p)
    return p


def stop_all():
    for p in PROCS:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in PROCS:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def make_cert(d):
    key, cert = os.path.join(d, "bench.key"), os.path.join(d, "bench.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=bench.test", "-addext", "subjectAltName=DNS:bench.test"],
                   check=True, capture_output=True)
    both = os.path.join(d, "bench-both.pem")
    with open(both, "w") as f:
        f.write(open(cert).read() + open(key).read())
    return cert, key, both


def rondel(d, port, backend, cert, key, build):
    conf = os.path.join(d, "rondel.yaml")
    with open(conf, "w") as f:
        f.write(f"""listeners:
  - name: tls
    bind: 127.0.0.1:{port}
    pool: p
    max_connections: 100000
    tls:
      certificates:
        - {{ cert: {cert}, key: {key} }}
pools:
  - name: p
    backends:
      - {{ address: 127.0.0.1:{backend} }}
log:
  level: warn
""")
    return pinned(0, [os.path.join(build, "src/server/rondel"), "-f", conf]), None


def haproxy(d, port, backend, both, idle):
    conf = os.path.join(d, "haproxy.cfg")
    with open(conf, "w") as f:
        f.write(f"""global
    nbthread 1
    maxconn {max(4096, idle + 100)}
    no strict-limits
    ssl-default-bind-options ssl-min-ver TLSv1.2
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 2s
    timeout client 60s
    timeout server 60s
frontend fe
    bind 127.0.0.1:{port} ssl crt {both} alpn http/1.1
    default_backend be
backend be
    server s1 127.0.0.1:{backend}
""")
    return pinned(0, ["haproxy", "-db", "-f", conf]), None


def nginx(d, port, backend, cert, key, idle):
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    wc = max(4096, idle + 1000)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1;
worker_rlimit_nofile {wc + 1000};
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections {wc}; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    upstream up {{ server 127.0.0.1:{backend}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        keepalive_requests 100000000;
        location / {{ proxy_pass http://up; proxy_http_version 1.1;
                     proxy_set_header Connection ""; }}
    }}
}}
""")
    return pinned(0, ["nginx", "-p", d, "-e", f"{d}/error.log", "-c", conf]), None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def keepalive(port, pid, duration):
    c0 = cpu_seconds(pid)
    out = subprocess.run(pinned(1, ["wrk", "-t1", "-c50", f"-d{duration}s",
                                    f"https://127.0.0.1:{port}/"]),
                         capture_output=True, text=True, timeout=duration + 60).stdout
    cpu = cpu_seconds(pid) - c0
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "cpu_us_per_req": cpu / max(reqs, 1) * 1e6}


def s_time(port, mode, duration):
    out = subprocess.run(pinned(1, ["openssl", "s_time", "-connect", f"127.0.0.1:{port}", mode,
                                    "-www", "/", "-time", str(duration)]),
                         capture_output=True, text=True, timeout=duration + 60).stdout
    m = re.search(r"(\d+) connections in (\d+) real seconds", out)
    return int(m.group(1)) / max(int(m.group(2)), 1) if m else 0.0


def idle_memory(port, pid, n):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    base = rss_kib(pid)
    conns = []
    for _ in range(n):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
        s.sendall(b"GET / HTTP/1.1\r\nHost: bench.test\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(4096)
        conns.append(s)
    time.sleep(1)  # let the proxy settle its buffers before reading RSS
    per = (rss_kib(pid) - base) * 1024 / n
    for s in conns:
        s.close()
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--idle", type=int, default=1000)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="rondel-tls-bench-")
    cert, key, both = make_cert(d)
    backend = free_port()
    start(pinned(1, [os.path.join(args.build_dir, "tools/test_backend/rondel-test-backend"),
                     "--listen", f"127.0.0.1:{backend}", "--name", "b"]), os.path.join(d, "b.log"))
    wait_port(backend)
    results = {}
    try:
        for name in ("rondel", "haproxy", "nginx"):
            port = free_port()
            sub = os.path.join(d, name)
            os.makedirs(sub)
            if name == "rondel":
                argv, env = rondel(sub, port, backend, cert, key, args.build_dir)
            elif name == "haproxy":
                argv, env = haproxy(sub, port, backend, both, args.idle)
            else:
                argv, env = nginx(sub, port, backend, cert, key, args.idle)
            p = start(argv, os.path.join(sub, "out.log"), env)
            wait_port(port)
            r = keepalive(port, p.pid, args.duration)
            r["full_handshakes_per_s"] = s_time(port, "-new", args.duration)
            r["resumed_handshakes_per_s"] = s_time(port, "-reuse", args.duration)
            r["idle_bytes_per_conn"] = idle_memory(port, p.pid, args.idle)
            results[name] = r
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=15)
    finally:
        stop_all()
    ha = results["haproxy"]
    print(f"{'proxy':8} {'req/s':>9} {'cpu us/req':>11} {'new hs/s':>9} {'resumed/s':>10} "
          f"{'idle B/conn':>12}")
    for name, r in results.items():
        print(f"{name:8} {r['rps']:9.0f} {r['cpu_us_per_req']:11.1f} "
              f"{r['full_handshakes_per_s']:9.0f} {r['resumed_handshakes_per_s']:10.0f} "
              f"{r['idle_bytes_per_conn']:12.0f}")
    print("rondel / haproxy: cpu per request %.2fx, full handshakes %.2fx, resumed %.2fx, "
          "idle memory %.2fx" % (
              results["rondel"]["cpu_us_per_req"] / max(ha["cpu_us_per_req"], 1e-9),
              results["rondel"]["full_handshakes_per_s"] / max(ha["full_handshakes_per_s"], 1e-9),
              results["rondel"]["resumed_handshakes_per_s"] /
              max(ha["resumed_handshakes_per_s"], 1e-9),
              results["rondel"]["idle_bytes_per_conn"] / max(ha["idle_bytes_per_conn"], 1e-9)))
    out_dir = os.path.join(ROOT, "tools", "bench", "results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, time.strftime("tls-%Y%m%dT%H%M%SZ.json", time.gmtime()))
    with open(path, "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=2)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
