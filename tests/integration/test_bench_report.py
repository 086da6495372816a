#!/usr/bin/env python3
"""tools/bench/bench.py's report, from made-up runs: the figures docs/benchmarks.md quotes come
out of these functions, so a wrong ratio or a column computed from the wrong field would
mislead every reader. Also the SCHED_BATCH prefix: only commands pinned to the client core get
it, never a proxy's; a bad latency flag is refused; and the benchmark's backends run as one
process serving every backend by default (one process each with test-each), each answering with
its own name. The proxies start on port 0 (rondel's ports read back from its log, HAProxy and
nginx on a socket held for them) and route to those backends; the idle pass's client reads
through one. Starts test backends and the proxies that are installed (rondel always), no wrk."""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

SOURCE_DIR = os.environ.get("RONDEL_SOURCE_DIR", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path[:0] = [os.path.join(SOURCE_DIR, "tools", "bench"), os.path.join(SOURCE_DIR, "tools", "pylib")]
from rondel_bench import cli, context, latency, profile, report  # noqa: E402
from rondel_bench import distribution, idle, proxies  # noqa: E402
from rondel_bench.backends import NginxBackends, TestBackends  # noqa: E402
from rondel_support import httpio, procfs, procs  # noqa: E402

BENCH_PY = os.path.join(SOURCE_DIR, "tools", "bench", "bench.py")


def run(rps, cpu=None, backends=5.0, core1=11.0, res1=3.0, cal0=1.0, p99=1500):
    r = {"rps": rps, "p50_us": 500, "p99_us": p99, "errors": 0, "loadavg": "1.0 1.0 1.0",
         "core0_busy": 0.9, "core1_busy": 0.99, "core1_us_per_req": core1,
         "backends_us_per_req": backends, "ipi_RES1_per_1k": res1, "ipi_CAL0_per_1k": cal0}
    if cpu is not None:
        r.update({"cpu_us_per_req": cpu, "cpu_busy": 0.95, "rss_kib": 6 * 1024,
                  "core0_us_per_req": cpu + 0.1, "preempted_per_s": 10})
    return r


def rows(lines, first_cell):
    """Table rows (lists of cells) whose first two cells are (workload, proxy)."""
    out = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0] == first_cell:
            out.setdefault(cells[1], []).append(cells)
    return out


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def main():
    results = {"uniform": {
        # three repetitions each; medians: rondel 115k, HAProxy 100k
        "rondel": [run(115000, 10.0, backends=5.0, core1=10.5, res1=3),
                   run(110000, 10.2, backends=5.2, core1=10.7, res1=4),
                   run(120000, 9.8, backends=4.8, core1=10.3, res1=2)],
        "haproxy": [run(100000, 12.0, backends=5.5, core1=11.2, res1=1, cal0=0),
                    run(99000, 12.1, backends=5.6, core1=11.3, res1=1, cal0=0),
                    run(101000, 11.9, backends=5.4, core1=11.1, res1=1, cal0=0)],
        "none": [run(200000, backends=2.1, core1=5.0, res1=0, cal0=0)],
    }}
    lines = report.throughput_tables(results)
    main_rows = rows([l for l in lines if l.count("|") == 17], "uniform")  # 16 columns
    r = main_rows["rondel"][0]
    # | workload | proxy | req/s | p50 | p99 | errors | CPU | core0 | busy | core0/1 | preempt | RSS |
    #   req/s ÷ H | p99 ÷ H | CPU ÷ H | RSS ÷ H |
    check(r[2] == "115,000 (110,000–120,000)", f"req/s median and range: {r[2]}")
    check(r[12] == "1.15", f"req/s ÷ HAProxy from the medians: {r[12]}")
    check(r[14] == "0.83", f"CPU per request ÷ HAProxy: {r[14]}")
    check(main_rows["none"][0][6] == "n/a", "no proxy has no proxy CPU")

    crow = rows([l for l in lines if l.count("|") == 9], "uniform")  # 8 columns
    c = crow["rondel"][0]
    # | workload | proxy | core 1 | backends | rest | RES to 1 | CAL to 0 | backends ÷ H |
    check(c[2] == "10.5 (10.3–10.7)", f"core 1 per request: {c[2]}")
    check(c[3] == "5.00 (4.80–5.20)", f"backends per request: {c[3]}")
    check(c[4] == "5.50 (5.50–5.50)", f"the rest is core 1 minus the backends: {c[4]}")
    check(c[5] == "3", f"rescheduling IPIs per 1,000 requests: {c[5]}")
    check(c[7] == "0.91", f"backends ÷ HAProxy: {c[7]}")

    args = type("A", (), {"duration": 10, "reps": 3})()
    text = report.batch_section(results, args)
    check(text.startswith("## Client core under SCHED_BATCH"), "the batch section has its heading")
    check("1.15" in text and "chrt -b 0" in text, "the batch section carries the same tables")

    lat = {"rondel": [dict(run(45000, 12.0), p90_us=900, p999_us=6000, p50_us=600, p99_us=1600)],
           "haproxy": [dict(run(46000, 13.5), p90_us=1000, p999_us=5000, p50_us=700, p99_us=1700)],
           "none": [dict(run(55000), p90_us=500, p999_us=900, p50_us=400, p99_us=600)]}
    largs = type("L", (), {"latency_conns": 100, "latency_delay_ms": 1, "zipf": 1.1, "duration": 10,
                           "reps": 1})()
    lr = [[c.strip() for c in l.strip().strip("|").split("|")]
          for l in latency.latency_section(lat, largs).splitlines() if l.startswith("| rondel |")]
    lr = lr[0] if lr else None
    # | proxy | req/s | p50 | p90 | p99 | p99.9 | errors | CPU | busy | p50 ÷ H | p99 ÷ H | p99.9 ÷ H |
    check(lr is not None and lr[4] == "1.600" and lr[9:12] == ["0.86", "0.94", "1.20"],
          f"latency pass: p99 in ms and p50 / p99 / p99.9 ÷ HAProxy: {lr}")

    sys_lines = profile.syscall_table({"rondel": ({"read": 200, "write": 100}, {"requests": 100}),
                                     "haproxy": ({"recvfrom": 400}, {"requests": 200})},
                                    ["rondel", "haproxy"])
    by_name = {l.split()[0]: l.split()[1:] for l in sys_lines}
    check(by_name["read"] == ["2.000", "0.000"] and by_name["recvfrom"] == ["0.000", "2.000"]
          and by_name["total"] == ["3.000", "2.000"], f"syscalls per request per proxy: {by_name}")



def placement_and_processes():
    """Command prefixes, the command line, /proc readers, versions, the backends."""
    ctx = context.Bench(nice=("nice", "-n", "5"))
    batch = ctx.with_client_sched(context.SCHED_BATCH)
    check(batch.pin(context.CLIENT_CORE) == ["chrt", "-b", "0", "taskset", "-c", context.CLIENT_CORE],
          "wrk and the backends run under SCHED_BATCH in the batch pass")
    check(batch.pin(context.PROXY_CORE) == ["taskset", "-c", context.PROXY_CORE],
          "the proxy keeps the default policy")
    check(batch.pin(None) == [], "unpinned commands get no prefix")
    check(batch.prefix(context.PROXY_CORE) == ["nice", "-n", "5", "taskset", "-c", context.PROXY_CORE],
          "--nice applies to every command, the proxy's too")
    check(batch.registry is ctx.registry, "the batch pass stops the processes of the same run")
    check(ctx.pin(context.CLIENT_CORE) == ["taskset", "-c", context.CLIENT_CORE],
          "outside the batch pass the client core has no prefix")

    bad = subprocess.run([sys.executable, BENCH_PY, "--latency-only", "--latency-delay-ms", "0"],
                         capture_output=True, text=True, timeout=30)
    check(bad.returncode == 2 and "--latency-delay-ms must be at least 1" in bad.stderr,
          f"a zero delay is refused with a clear message: {bad.stderr.strip().splitlines()[-1:]}")

    with open("/proc/interrupts") as f:
        has_res = any(line.split()[:1] == ["RES:"] for line in f)
    ipis = procfs.ipi_counts()
    if has_res:  # x86 names them RES and CAL; other architectures differ (the table shows 0)
        check("RES0" in ipis and "CAL0" in ipis and all(v >= 0 for v in ipis.values()),
              f"/proc/interrupts gives RES and CAL counts per CPU: {sorted(ipis)[:4]}")
    me = [os.getpid()]
    check(procfs.voluntary_switches(me) >= procfs.status_sum(me, "voluntary_ctxt_switches"),
          "context switches are summed over every thread")

    check("outside this checkout" in cli.versions(sys.executable),
          "a report names a rondel binary built outside the checkout whose commit it gives")

    binary = os.environ.get("RONDEL_TEST_BACKEND")
    if binary:
        workdir = tempfile.mkdtemp(prefix="bench-backends-")
        for each, processes in ((False, 1), (True, 4)):
            ctx = context.Bench(workdir=workdir, backend_bin=binary)
            b = TestBackends(ctx, 4, ledger=True, core=None, each=each)
            try:
                names = [urllib.request.urlopen(f"http://127.0.0.1:{port}/obj/1", timeout=5)
                         .headers["X-Backend"] for port in b.ports]
                check(len(b.pids()) == processes and names == ["b1", "b2", "b3", "b4"],
                      f"{b.kind}: {len(b.pids())} process(es) serve backends {names}")
                counts = b.per_path_counts()
                check(all(counts[n] == {"/obj/1": 1} for n in names),
                      f"{b.kind}: each backend writes its own ledger")
            finally:
                b.stop()
            check(all(p.poll() == 0 for p in b.procs), f"{b.kind}: SIGTERM stops every process, exit 0")
        rondel = os.environ.get("RONDEL_BIN")
        if rondel:
            proxies_on_port_0(binary, rondel)


def proxies_on_port_0(binary, rondel):
    """Each proxy class starts on port 0 in front of test backends and routes by URI; rondel's
    /api/route agrees with the backend that served a path; the idle pass holds connections
    through rondel and reads its memory. HAProxy and nginx only where they are installed."""
    workdir = tempfile.mkdtemp(prefix="bench-proxies-")
    ctx = context.Bench(opts=type("O", (), {"paths": 20})(), workdir=workdir,
                        rondel_bin=rondel, backend_bin=binary)
    try:
        b = TestBackends(ctx, 2, core=None)
        kinds = [proxies.Rondel] + [c for c, tool in ((proxies.HAProxy, "haproxy"), (proxies.Nginx, "nginx"))
                                    if shutil.which(tool)]
        for cls in kinds:
            p = cls(ctx, b, bounded=True, admin=cls is proxies.Rondel, core=None)
            served = {f"/obj/{i}": httpio.exchange(p.port, "GET", f"/obj/{i}")[1]["x-backend"]
                      for i in range(1, 21)}
            check(p.port not in b.ports and set(served.values()) <= {"b1", "b2"},
                  f"{cls.name} listens on its own port 0 socket and routes to the backends")
            if cls is proxies.Rondel:
                rc = distribution.check_routes(ctx, p, served, sample=20)
                check(rc == {"agree": 20, "total": 20}, f"/api/route names the backend that served: {rc}")
            p.stop()
            check(p.proc.returncode is not None, f"{cls.name} stopped by pid")
        if not shutil.which("nginx"):
            print("skip: nginx not installed (HAProxy and nginx proxies, nginx backends)")
        else:
            nb = NginxBackends(ctx, 2, ledger=True, core=None)
            names = [httpio.exchange(port, "GET", "/obj/1")[1]["x-backend"] for port in nb.ports]
            check(names == ["b1", "b2"], f"nginx backends on held ports answer with their names: {names}")
            # nginx writes its access log after the response: wait for the line.
            procs.wait_until(lambda: nb.per_path_counts()["b2"]["/obj/1"] == 1, timeout=10,
                             what="the nginx backend's ledger line")
            nb.stop()
        r = idle.idle_run(ctx, proxies.Rondel, b, 50)
        check(r["n"] == 50 and r["open_fds"] > r["open_fds_low"] and r["rss_kib"] > 0,
              f"idle pass through rondel: fds {r['open_fds_low']} -> {r['open_fds']}")
        b.stop()
    finally:
        ctx.registry.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
    placement_and_processes()
