"""The benchmark's command line (tools/bench/run.sh passes its flags through bench.py): parse
the options, build the run's context, run the passes asked for and write the report."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from rondel_support import procfs

from .backends import NginxBackends, TestBackends
from .bodies import WORKLOAD_KEYS, bodies_pass, bodies_section
from .context import BENCH_DIR, CLIENT_CORE, ROOT, SCHED_BATCH, Bench, log
from .distribution import distribution
from .h2 import h2_pass, h2_section
from .idle import idle_pass, idle_section
from .latency import latency_pass, latency_section
from .profile import profile
from .report import batch_section, header, tables
from .throughput import calibrate_backends, throughput_pass
from .tls import tls_pass, tls_section
from .workers import workers_pass, workers_section

DESCRIPTION = "Side-by-side benchmark: rondel vs HAProxy vs nginx vs no proxy (see docs/benchmarks.md)."

BACKEND_KINDS = {"test": "rondel-test-backend (1 process for all, one event loop)",
                 "test-each": "rondel-test-backend (1 process each)",
                 "nginx": "nginx return 200 (1 process, 1 worker)"}


def parser():
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backends", type=int, default=4)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--paths", type=int, default=10000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--backend", choices=["auto", "test", "test-each", "nginx"], default="auto",
                    help="backend kind; auto = measure both, keep the cheaper per request")
    ap.add_argument("--quick", action="store_true", help="1 rep of 3 s, short distribution pass, no profile")
    ap.add_argument("--no-dist", action="store_true", help="skip the distribution/spill pass")
    ap.add_argument("--profile", action="store_true", help="also perf-profile rondel (Zipf workload)")
    ap.add_argument("--profile-only", action="store_true", help="only perf-profile rondel")
    ap.add_argument("--profile-duration", type=int, default=10)
    ap.add_argument("--idle", type=int, default=None, metavar="N",
                    help="idle keep-alive connections held per proxy in the memory pass "
                         "(default 10000, 2000 with --quick; 0 skips the pass)")
    ap.add_argument("--idle-only", action="store_true",
                    help="only the idle-connection memory pass")
    ap.add_argument("--workers-pass", action="store_true",
                    help="add the workers pass (rondel workers 1 vs 2, HAProxy nbthread 1 vs 2, "
                         "unpinned) to a full run")
    ap.add_argument("--workers-only", action="store_true", help="only the workers pass")
    ap.add_argument("--batch-pass", action="store_true",
                    help="also run the throughput pass with wrk and the backends under SCHED_BATCH")
    ap.add_argument("--latency-pass", action="store_true",
                    help="also measure latency at the same offered load (wrk delay() between requests)")
    ap.add_argument("--latency-only", action="store_true", help="only the latency pass")
    ap.add_argument("--latency-conns", type=int, default=100)
    ap.add_argument("--latency-delay-ms", type=int, default=1)
    ap.add_argument("--bodies-pass", action="store_true",
                    help="add the large-body pass (32 B .. 4 MiB, mixed, 100 x 4 MiB; static "
                         "sendfile backends; HAProxy splice-auto and nginx unbuffered too)")
    ap.add_argument("--bodies-only", action="store_true", help="only the large-body pass")
    ap.add_argument("--bodies-workloads", default=None, metavar="KEYS",
                    help="only these workloads of the large-body pass, comma-separated: "
                         + ",".join(WORKLOAD_KEYS))
    ap.add_argument("--bodies-baseline", default=None, metavar="RONDEL",
                    help="another rondel binary (e.g. main's build) measured beside this one in "
                         "the large-body pass, for the 32 B no-regression check")
    ap.add_argument("--tls-pass", action="store_true",
                    help="add the TLS pass (keep-alive over TLS, full and resumed handshake "
                         "rates, idle TLS connection memory; HAProxy ssl crt, nginx listen ssl)")
    ap.add_argument("--tls-only", action="store_true", help="only the TLS pass")
    ap.add_argument("--h2-pass", action="store_true",
                    help="add the HTTP/2 pass (h2load -c 10 -m 10 over TLS with ALPN h2, small and "
                         "256 KiB bodies; HAProxy alpn h2,http/1.1, nginx listen ssl http2)")
    ap.add_argument("--h2-only", action="store_true", help="only the HTTP/2 pass")
    ap.add_argument("--tls-idle", type=int, default=1000, metavar="N",
                    help="idle TLS connections measured per proxy in the TLS pass (default 1000)")
    ap.add_argument("--calib-duration", type=int, default=5)
    ap.add_argument("--sweep-duration", type=int, default=4)
    ap.add_argument("--nice", type=int, default=0,
                    help="run proxies, backends and wrk at this nice level (e.g. -10 on a shared machine)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--out", default=os.path.join(BENCH_DIR, "results"))
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    return ap


def parse_args(argv=None):
    """The options, checked, with --quick's and --idle's defaults applied."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.latency_conns < 1 or args.latency_delay_ms < 1:
        ap.error("--latency-conns and --latency-delay-ms must be at least 1")
    if args.quick:
        args.reps, args.duration, args.calib_duration, args.sweep_duration = 1, 3, 2, 3
    if args.idle is None:
        args.idle = 2000 if args.quick else 10000
    if sum([args.idle_only, args.profile_only, args.workers_only, args.bodies_only,
            args.tls_only, args.h2_only]) > 1:
        ap.error("--idle-only, --profile-only, --workers-only, --bodies-only, --tls-only and "
                 "--h2-only exclude each other")
    if args.tls_idle < 10:
        ap.error("--tls-idle must be at least 10")
    if args.bodies_workloads and not set(args.bodies_workloads.split(",")) <= set(WORKLOAD_KEYS):
        ap.error(f"--bodies-workloads {args.bodies_workloads}: the keys are "
                 + ",".join(WORKLOAD_KEYS))
    if args.bodies_baseline and not os.access(args.bodies_baseline, os.X_OK):
        ap.error(f"--bodies-baseline {args.bodies_baseline}: not an executable file")
    if args.idle_only and args.idle <= 0:
        ap.error("--idle-only needs --idle N > 0")
    return args


def versions(rondel_binary):
    """One line: rondel's commit (and how many tracked files differ), where and when its binary
    was built, and the HAProxy, nginx and wrk versions."""
    def first_line(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"
    head = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    try:
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.count("\n")
    except (OSError, subprocess.TimeoutExpired):
        dirty = "?"
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(rondel_binary)))
    where = ""
    if os.path.relpath(os.path.realpath(rondel_binary), os.path.realpath(ROOT)).startswith(".."):
        # BUILD_DIR elsewhere: the commit and modified files above describe this checkout, not it.
        where = f" {rondel_binary}, outside this checkout,"
    return (f"rondel {head} ({dirty} modified tracked files; binary{where} built {built}), "
            + first_line(["haproxy", "-v"]).split(" - ")[0] + ", "
            + first_line(["nginx", "-v"]).replace("nginx version: ", "") + ", "
            + first_line(["wrk", "-v"]).split(" Copyright")[0])


def host_line():
    with open("/proc/cpuinfo") as f:
        model = f.read().split("model name")[1].split(":")[1].split("\n")[0].strip()
    return f"{os.cpu_count()} CPUs, {model}, Linux {os.uname().release}"


def backend_factory(ctx, kind):
    """make_backends(ledger=False, core=CLIENT_CORE) for the chosen backend kind."""
    def make_backends(ledger=False, core=CLIENT_CORE):
        if kind in ("test", "test-each"):
            return TestBackends(ctx, ctx.opts.backends, ledger, core, each=kind == "test-each")
        return NginxBackends(ctx, ctx.opts.backends, ledger, core)
    return make_backends


class Output:
    """Writes a report (PREFIX-DATE[-quick].md and .json in --out) and prints it."""

    def __init__(self, args, stamp):
        self.args, self.stamp = args, stamp

    def write(self, prefix, text, data):
        base = os.path.join(self.args.out, f"{prefix}-{self.stamp}{'-quick' if self.args.quick else ''}")
        with open(base + ".md", "w") as f:
            f.write(text)
        with open(base + ".json", "w") as f:
            json.dump(data, f, indent=1)
        print(text)
        log(f"results written to {base}.md")


# The --X-only passes that write their own report: (option, log line, result prefix and JSON
# key, run(ctx, make_backends), section(result, args)).
ONLY_PASSES = (
    ("idle_only", "idle-connection pass ({args.idle} connections) ...", "idle", "idle",
     lambda ctx, mk: idle_pass(ctx), lambda r, args: idle_section(r)),
    ("latency_only", "latency pass (same offered load) ...", "latency", "latency_runs",
     latency_pass, latency_section),
    ("workers_only", "workers pass (unpinned) ...", "workers", "workers",
     workers_pass, lambda r, args: workers_section(r)),
    ("bodies_only", "large-body pass ...", "bodies", "bodies", bodies_pass, bodies_section),
    ("tls_only", "TLS pass ...", "tls", "tls", tls_pass, tls_section),
    ("h2_only", "HTTP/2 pass ...", "h2", "h2", h2_pass, h2_section),
)


def run_only_pass(ctx, make_backends, meta, out):
    """Runs the one --X-only pass asked for, if any; True when it did."""
    args = ctx.opts
    for option, what, prefix, key, run, section in ONLY_PASSES:
        if getattr(args, option):
            log(what.format(args=args))
            result = run(ctx, make_backends)
            meta["load_after"] = procfs.loadavg()
            out.write(prefix, "\n".join(header(meta)) + "\n\n" + section(result, args),
                      {"meta": meta, key: result})
            return True
    return False


def run_full(ctx, make_backends, meta, calib, out, workloads, kind):
    """The throughput pass and every other pass the options add; one report."""
    args = ctx.opts
    results = throughput_pass(ctx, make_backends, workloads)
    batch = lat = idle = workers = bodies = tls = h2 = None
    if args.batch_pass:
        log("throughput pass with wrk and the backends under SCHED_BATCH ...")
        batch_ctx = ctx.with_client_sched(SCHED_BATCH)
        batch = throughput_pass(batch_ctx, backend_factory(batch_ctx, kind), workloads)
    if args.latency_pass:
        log("latency pass (same offered load) ...")
        lat = latency_pass(ctx, make_backends)
    dist_rows = []
    if not args.no_dist:
        log("distribution pass ...")
        dist_rows, meta["dist_checks"] = distribution(ctx, make_backends, workloads)
    if args.idle > 0:
        log(f"idle-connection pass ({args.idle} connections) ...")
        idle = idle_pass(ctx)
    if args.workers_pass:
        log("workers pass (unpinned) ...")
        workers = workers_pass(ctx, make_backends)
    if args.bodies_pass:
        log("large-body pass ...")
        bodies = bodies_pass(ctx)
    if args.tls_pass:
        log("TLS pass ...")
        tls = tls_pass(ctx, make_backends)
    if args.h2_pass:
        log("HTTP/2 pass ...")
        h2 = h2_pass(ctx, make_backends)
    meta["load_after"] = procfs.loadavg()
    text = tables(results, dist_rows, calib, args, meta)
    for section in (batch and batch_section(batch, args), lat and latency_section(lat, args),
                    idle and idle_section(idle), workers and workers_section(workers),
                    bodies and bodies_section(bodies, args), tls and tls_section(tls, args),
                    h2 and h2_section(h2, args)):
        if section:
            text += "\n" + section
    if args.profile:
        log("profiling rondel ...")
        ppath = profile(ctx, make_backends, args.zipf, args.out, out.stamp)
        text += f"\nProfile: {os.path.relpath(ppath, ROOT)}\n"
    out.write("bench", text, {"meta": meta, "calibration": calib,
                              "runs": {wl: dict(v) for wl, v in results.items()},
                              "batch_runs": {wl: dict(v) for wl, v in batch.items()} if batch else None,
                              "latency_runs": lat,
                              "distribution": dist_rows, "idle": idle, "workers": workers,
                              "bodies": bodies, "tls": tls, "h2": h2})


def run(ctx, meta, out):
    """Chooses the backend kind (calibrating with --backend auto), then runs the passes."""
    args = ctx.opts
    calib = None
    kind = args.backend
    if kind == "auto" and (args.profile_only or args.idle_only or args.workers_only or args.latency_only
                           or args.bodies_only or args.tls_only or args.h2_only):
        kind = "test"
    if kind == "auto":
        log("calibrating backends ...")
        calib = calibrate_backends(ctx)
        kind = min(calib, key=lambda k: calib[k]["cpu_us_per_req"])
    meta["backend_kind"] = BACKEND_KINDS[kind]
    make_backends = backend_factory(ctx, kind)
    if args.profile_only:
        ppath = profile(ctx, make_backends, args.zipf, args.out, out.stamp)
        with open(ppath) as f:
            print(f.read())
        return
    if run_only_pass(ctx, make_backends, meta, out):
        return
    workloads = [("uniform", 0.0), (f"zipf {args.zipf}", args.zipf)]
    run_full(ctx, make_backends, meta, calib, out, workloads, kind)


def main(argv=None):
    args = parse_args(argv)
    rondel_bin = os.path.join(args.build_dir, "src", "server", "rondel")
    ctx = Bench(opts=args, workdir=tempfile.mkdtemp(prefix="rondel-bench-"), rondel_bin=rondel_bin,
                backend_bin=os.path.join(args.build_dir, "tools", "test_backend", "rondel-test-backend"),
                nice=("nice", "-n", str(args.nice)) if args.nice else ())
    os.makedirs(args.out, exist_ok=True)
    out = Output(args, time.strftime("%Y%m%d-%H%M%S"))
    meta = {"command": args.command or " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "host": host_line(), "load_before": procfs.loadavg(), "versions": versions(rondel_bin)}
    ok = False
    try:
        run(ctx, meta, out)
        ok = True
    except KeyboardInterrupt:
        ctx.registry.stop_all()
        sys.exit(130)
    finally:
        ctx.registry.stop_all()
        if ok:
            shutil.rmtree(ctx.workdir, ignore_errors=True)
        else:
            log(f"work files (configs, output of each proxy) kept in {ctx.workdir}")
