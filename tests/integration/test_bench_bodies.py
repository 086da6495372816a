#!/usr/bin/env python3
"""tools/bench's large-body pass (rondel_bench/bodies.py), without wrk: the report from made-up
runs (CPU per GiB, RSS growth per connection, the ratios to HAProxy and to HAProxy splice-auto,
the target checks of the large-object issue), the static backends (nginx with sendfile serving
every size byte-exact, checked against rondel-less GETs) and the two extra proxy variants'
configurations (HAProxy `option splice-auto`, nginx `proxy_buffering off`), each accepted by
its own config check. The backend and proxy parts are skipped when nginx / HAProxy are not
installed. Takes about a second."""
import os
import shutil
import subprocess
import sys
import tempfile
import types

SOURCE_DIR = os.environ.get("RONDEL_SOURCE_DIR", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path[:0] = [os.path.join(SOURCE_DIR, "tools", "bench"), os.path.join(SOURCE_DIR, "tools", "pylib")]
from rondel_bench import bodies, cli, context, proxies  # noqa: E402
from rondel_support import httpio  # noqa: E402

GIB = 1 << 30


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def run(rps, cpu_us, p99_us, body, requests=10000, rss_kib=8192, rss_start_kib=4096):
    r = {"rps": rps, "requests": requests, "duration_us": 10_000_000, "bytes": requests * body,
         "p99_us": p99_us, "errors": 0, "core1_busy": 0.99, "backends_us_per_req": 3.0}
    if cpu_us is not None:
        r.update({"cpu_us_per_req": cpu_us, "cpu_busy": 0.9, "rss_kib": rss_kib})
    bodies._add_body_figures(r, rss_start_kib)
    return r


def cells(text, workload, proxy):
    for line in text.splitlines():
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) > 2 and c[0] == workload and c[1] == proxy:
            return c
    raise AssertionError(f"no row {workload} / {proxy}")


def report():
    k256 = 256 << 10
    m4 = 4 << 20
    results = {
        "256 KiB": {"rondel": [run(13000, 40.0, 5000, k256), run(12000, 50.0, 6000, k256),
                               run(14000, 45.0, 5500, k256)],
                    "haproxy": [run(10000, 80.0, 6000, k256)],
                    "haproxy-splice": [run(9000, 90.0, 7000, k256)],
                    "none": [run(30000, None, 1000, k256)]},
        "32 B": {"rondel": [run(30000, 20.0, 1000, 32)]},
        "256 KiB, paced": {"rondel": [run(4000, 45.0, 3000, k256)],
                           "haproxy": [run(4000, 80.0, 4000, k256)]},
        "4 MiB": {"rondel": [run(500, 1000.0, 9000, m4, requests=1024)],
                  "haproxy": [run(400, 4000.0, 9000, m4, requests=1024)],
                  "haproxy-splice": [run(450, 1600.0, 9000, m4, requests=1024)]},
        "4 MiB × 100 conns": {"rondel": [run(400, 1000.0, 9000, m4, requests=1024,
                                             rss_kib=4096 + 6400)]},
    }
    args = types.SimpleNamespace(backends=4, conns=50, duration=10, reps=3)
    text = bodies.bodies_section(results, args)
    print(text)
    row = cells(text, "256 KiB", "rondel")
    # req/s median 13,000 over HAProxy's 10,000; CPU/req median 45 over 80.
    check(row[2].startswith("13,000 (12,000–14,000)"), "req/s: median (min–max)")
    check(row[13] == "1.30", "req/s ÷ HAProxy from the medians")
    check(row[14] == "0.56", "CPU/req ÷ HAProxy from the medians")
    check(row[17] == "0.92", "p99 ÷ HAProxy from the medians (5.5 / 6.0 ms)")
    # 4 MiB: 1024 requests of 4 MiB = 4 GiB; 1000 µs each = 1.024 s: 256 ms/GiB.
    row = cells(text, "4 MiB", "rondel")
    check(row[7] == "256", "CPU per GiB: proxy CPU over the bytes received")
    check(row[15] == "0.25" and row[16] == "0.62", "CPU/GiB ÷ HAProxy and ÷ splice-auto")
    row = cells(text, "4 MiB × 100 conns", "rondel")
    check(row[12] == "64.0", "RSS growth per connection: (peak - start) / 100 connections")
    none = cells(text, "256 KiB", "none")
    check(none[6] == "n/a" and none[11] == "n/a", "no CPU or RSS figures for wrk -> backend")
    check("| 256 KiB: req/s ≥ 1.2 × HAProxy | 1.30 | yes |" in text, "target met")
    check("| 256 KiB: CPU/req ≤ 0.6 × HAProxy | 0.56 | yes |" in text, "target met (lower)")
    check("| 4 MiB: CPU/GiB ≤ HAProxy splice-auto | 0.62 | yes |" in text, "splice-auto target")
    check("| 32 B: req/s ≥ 0.94 × rondel-base (no regression) | n/a (no rondel-base in this run)"
          in text, "a target whose anchor was not run says so")
    del results["4 MiB"]
    text = bodies.bodies_section(results, args)
    check("| 4 MiB: CPU/GiB ≤ 0.5 × HAProxy | n/a (workload not in this run) | n/a |" in text,
          "a target whose workload was not run (--bodies-workloads) says so")
    check("rondel 4,000 req/s against HAProxy's 4,000, p99 3.00 against 4.00 ms (0.75 ×)" in text
          and "Paced, at about the same offered load" in text,
          "the paced row's p99 ratio, at the same offered load")
    check(cells(text, "256 KiB, paced", "rondel")[17] == "0.75", "the paced row in the table")


def workload_selection():
    pick = bodies.selected_workloads(types.SimpleNamespace(bodies_workloads="256k,256k-paced"))
    check([w[1] for w in pick] == ["256 KiB", "256 KiB, paced"], "--bodies-workloads picks by key")
    paced = dict((w[0], w[4]) for w in bodies.WORKLOADS)
    check(paced["256k-paced"] == bodies.PACED_DELAY_MS and paced["256k"] is None,
          "only the paced workload pauses between requests")
    check(len(bodies.selected_workloads(types.SimpleNamespace())) == len(bodies.WORKLOADS),
          "every workload by default")
    try:
        cli.parse_args(["--bodies-only", "--bodies-workloads", "256k,4mb"])
        check(False, "an unknown workload key is refused")
    except SystemExit as e:
        check(e.code == 2, "an unknown workload key is refused with a usage error")
    lua = open(bodies.BODIES_LUA).read()
    check('os.getenv("BENCH_DELAY_MS")' in lua and "delay = function()" in lua,
          "bodies.lua pauses when BENCH_DELAY_MS is set")


def static_backends(workdir):
    if not shutil.which("nginx"):
        print("skip: nginx not installed")
        return
    ctx = context.Bench(opts=types.SimpleNamespace(), workdir=workdir, nice=())
    b = bodies.StaticBackends(ctx, 2, core=None)  # checks every size on every port itself
    try:
        for port in b.ports:
            for name, size in bodies.SIZES.items():
                status, _, body = httpio.http_get(port, f"/{name}/obj/{size % 97}")
                check(status == 200 and len(body) == size,
                      f"static backend {port} serves {name} as {size} bytes on any path")
    finally:
        b.stop()


def proxy_configs(workdir):
    hap = proxies.haproxy_conf("127.0.0.1:1", [("b1", 2)], "uri", factor=125,
                               extra_defaults=proxies.HAProxySplice.extra_defaults)
    check("\n    option splice-auto\n" in hap, "splice-auto goes in HAProxy's defaults")
    check(proxies.haproxy_conf("127.0.0.1:1", [("b1", 2)], "uri", factor=125).count(
        "option splice-auto") == 0, "default HAProxy has no splice-auto")
    ngx = proxies.nginx_conf(1, [2], workdir, extra_location=proxies.NginxUnbuffered.extra_location)
    check("proxy_buffering off;" in ngx, "nginx-nobuf turns proxy buffering off")
    if shutil.which("haproxy"):
        path = os.path.join(workdir, "h.cfg")
        with open(path, "w") as f:
            f.write(hap)
        out = subprocess.run(["haproxy", "-c", "-f", path], capture_output=True, text=True)
        check(out.returncode == 0, f"haproxy -c accepts the splice-auto config {out.stderr[-300:]}")
    if shutil.which("nginx"):
        path = os.path.join(workdir, "n.conf")
        with open(path, "w") as f:
            f.write(ngx)
        out = subprocess.run(["nginx", "-t", "-p", workdir, "-e", f"{workdir}/error.log",
                              "-c", path], capture_output=True, text=True)
        check(out.returncode == 0, f"nginx -t accepts the unbuffered config {out.stderr[-300:]}")


def main():
    report()
    workload_selection()
    workdir = tempfile.mkdtemp(prefix="rondel-bench-bodies-")
    try:
        static_backends(workdir)
        proxy_configs(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
