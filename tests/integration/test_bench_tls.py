#!/usr/bin/env python3
"""tools/bench's TLS pass (rondel_bench/tls.py), short: the report from made-up runs (medians,
ratios to HAProxy, the issue's targets), the openssl s_time output it parses, HAProxy's and
nginx's TLS configurations (each accepted by its own config check, skipped when not installed),
and one short real round against rondel: its TLS listener from the pass's config, 1 s of full
and 1 s of resumed handshakes with s_time (rondel's own counters confirm which were resumed) and
the idle TLS memory of a few connections. Takes a few seconds."""
import os
import shutil
import subprocess
import sys
import tempfile
import types

from harness import BACKEND_BIN, RONDEL_BIN, Backend, metric_sum, scrape

SOURCE_DIR = os.environ.get("RONDEL_SOURCE_DIR", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path[:0] = [os.path.join(SOURCE_DIR, "tools", "bench"), os.path.join(SOURCE_DIR, "tools", "pylib")]
from rondel_bench import context, proxies, tls  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def rep(rps, cpu, full_cpu, idle, full_rate=100.0):
    return {"keepalive": {"rps": rps, "cpu_us_per_req": cpu, "p99_us": 2000},
            "full": {"hs_per_s": full_rate, "cpu_us_per_hs": full_cpu},
            "resumed": {"hs_per_s": 2 * full_rate, "cpu_us_per_hs": full_cpu / 2},
            "idle_bytes_per_conn": idle}


def row(text, table_head, name):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(table_head))
    for line in lines[start:]:
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if c[0] == name:
            return c
    raise AssertionError(f"no row {name} after {table_head}")


def report():
    results = {"rondel": [rep(9000, 40.0, 500, 14000), rep(11000, 44.0, 520, 15000),
                          rep(10000, 42.0, 480, 14500)],
               "haproxy": [rep(8000, 50.0, 800, 15500)],
               "nginx": [rep(7000, 52.0, 700, 15000)]}
    args = types.SimpleNamespace(backends=4, conns=50, duration=5, reps=3, tls_idle=1000)
    text = tls.tls_section(results, args)
    print(text)
    r = row(text, "| proxy |", "rondel")
    check(r[1].startswith("10,000 (9,000–11,000)"), "keep-alive req/s: median (min–max)")
    r = row(text, "| ÷ HAProxy |", "rondel")
    check(r[1] == "1.25" and r[2] == "0.84", "req/s and CPU/req ÷ HAProxy from the medians")
    check(r[5] == "0.62" and r[9] == "0.94", "CPU per full handshake and idle memory ÷ HAProxy")
    check("| CPU per request ≤ 0.9 × HAProxy | 0.84 | yes |" in text, "CPU target met")
    check("| full handshakes/s ≥ HAProxy | 1.00 | yes |" in text, "measured rate target")
    check("| full handshakes per core-second ≥ HAProxy | 1.60 | yes |" in text,
          "handshake target from the CPU per handshake (800 / 500 µs)")
    check("| idle TLS connection memory ≤ HAProxy | 0.94 | yes |" in text, "idle target met")
    none = tls.tls_section({"rondel": results["rondel"]}, args)
    check("| CPU per request ≤ 0.9 × HAProxy | n/a | n/a |" in none, "no HAProxy: n/a")


def s_time_parse():
    out = ("Collecting connection statistics for 1 seconds\n****\n\n"
           "947 connections in 0.32s; 2959.38 connections/user sec, bytes read 131633\n"
           "947 connections in 1 real seconds, 139 bytes read per connection\n")
    r = tls.s_time_result([out, out], wall=2.0, cpu_s=0.947)
    check(r["handshakes"] == 1894 and r["hs_per_s"] == 947.0, "s_time counts summed over clients")
    check(r["cpu_us_per_hs"] == 500.0 and r["bytes_per_conn"] == 139,
          "CPU and bytes per connection")


def configs(workdir):
    tls.TlsProxy.cert, tls.TlsProxy.key, tls.TlsProxy.both = tls.make_cert(workdir)
    backends = types.SimpleNamespace(names=["b1"], ports=[2])
    held = types.SimpleNamespace(fd=3, port=4)
    for kind, tool in ((tls.TlsHAProxy, "haproxy"), (tls.TlsNginx, "nginx")):
        p = kind.__new__(kind)
        p.idle, p.workers, p.dir = 0, 1, os.path.join(workdir, tool)
        os.makedirs(p.dir)
        argv, _ = p.argv(backends, True, held)
        conf = open(argv[argv.index("-f" if tool == "haproxy" else "-c") + 1]).read()
        if tool == "haproxy":
            check(f"bind fd@3 ssl crt {tls.TlsProxy.both} ciphersuites {tls.TLS13_SUITE}\n" in conf,
                  "HAProxy binds with ssl crt and the pinned suite")
            conf = conf.replace("fd@3", "127.0.0.1:1")  # haproxy -c cannot check an fd bind
        else:
            check("listen 127.0.0.1:4 ssl;" in conf and "ssl_certificate_key " in conf,
                  "nginx listens with ssl and the same certificate")
            check(f"ssl_conf_command Ciphersuites {tls.TLS13_SUITE};" in conf and
                  "ssl_protocols TLSv1.2 TLSv1.3;" in conf, "nginx: TLS 1.3 and the pinned suite")
            for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
                os.makedirs(os.path.join(p.dir, sub), exist_ok=True)
        if not shutil.which(tool):
            print(f"skip: {tool} not installed")
            continue
        path = os.path.join(p.dir, "check.conf")
        with open(path, "w") as f:
            f.write(conf)
        cmd = (["haproxy", "-c", "-f", path] if tool == "haproxy" else
               ["nginx", "-t", "-p", p.dir, "-e", f"{p.dir}/error.log", "-c", path])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        check(out.returncode == 0, f"{tool} accepts its TLS config {out.stderr[-300:]}")


def real_round(workdir):
    backend = Backend("b1")
    ctx = context.Bench(opts=types.SimpleNamespace(), workdir=workdir, rondel_bin=RONDEL_BIN,
                        backend_bin=BACKEND_BIN, nice=())
    backends = types.SimpleNamespace(names=["b1"], ports=[int(backend.address.split(":")[1])])
    p = tls.TlsRondel(ctx, backends, admin=True, idle=20, core=None)
    try:
        for name, mode in tls.HS_MODES:
            before = metric_sum(scrape(p.admin_port)[1], "rondel_tls_resumptions_total")
            r = tls.handshakes(ctx, p, mode, 1, core=None, warm_up=False)
            resumed = metric_sum(scrape(p.admin_port)[1], "rondel_tls_resumptions_total") - before
            print(f"{name}: {r}; {resumed:.0f} resumed")
            check(r["handshakes"] > 0 and r["bytes_per_conn"] > 0,
                  f"s_time {mode}: connections with a response")
            if name == "full":
                check(resumed == 0, "s_time -new: no handshake resumed")
            else:
                check(resumed >= r["handshakes"] - tls.HS_CLIENTS,
                      "s_time -reuse: all but each client's first handshake resumed")
        idle = tls.idle_tls(p, 20, warm=5)
        # 16 connections say nothing about the figure itself (allocator noise): it is read.
        check(isinstance(idle["idle_bytes_per_conn"], float) and idle["idle_conns"] == 20,
              f"idle TLS memory measured: {idle}")
    finally:
        p.stop()
        ctx.registry.stop_all()
        backend.stop()


def main():
    report()
    s_time_parse()
    workdir = tempfile.mkdtemp(prefix="rondel-bench-tls-")
    try:
        configs(workdir)
        real_round(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
