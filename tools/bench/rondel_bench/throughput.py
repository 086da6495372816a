"""The throughput pass (every target as fast as it goes, alternating over reps; also run again
under SCHED_BATCH) and the backend calibration that picks the cheaper backend kind."""

from collections import defaultdict

from rondel_support import procfs
from rondel_support.procfs import CLK_TCK

from .backends import NginxBackends, TestBackends
from .context import log
from .load import alternating, measured_run, run_wrk
from .proxies import NoProxy


def _run_line(rep, wl, name, r):
    return (f"  rep {rep + 1} {wl:10} {name:8} {r['rps']:>10,.0f} req/s p99 {r['p99_us'] / 1000:.2f} ms"
            + (f" cpu {r['cpu_us_per_req']:.1f} us/req busy {r['cpu_busy'] * 100:.0f}% preempt/s {r['preempted_per_s']:.0f}" if "cpu_busy" in r else "")
            + f" core0 {r['core0_busy'] * 100:.0f}% core1 {r['core1_busy'] * 100:.0f}%"
            + f" backends {r['backends_us_per_req']:.1f} us/req"
            + f" errors {r['errors']} load {r['loadavg']}")


def throughput_pass(ctx, make_backends, workloads):
    """{workload: {proxy: [measured_run results]}}, every target as fast as it goes."""
    results = {wl: defaultdict(list) for wl, _ in workloads}
    for rep, wl, zipf, p, b in alternating(ctx, make_backends, workloads):
        r = measured_run(ctx, p, zipf, ctx.opts.duration, seed=rep + 1, backend_pids=b.pids())
        results[wl][p.name].append(r)
        log(_run_line(rep, wl, p.name, r))
    return results


def calibrate_backends(ctx):
    """CPU µs per request of one test backend vs one nginx `return 200` server, wrk -> backend."""
    res = {}
    for kind in ("test", "nginx"):
        b = TestBackends(ctx, 1) if kind == "test" else NginxBackends(ctx, 1)
        try:
            tgt = NoProxy(b)
            run_wrk(ctx, tgt.url(), 1, 0)
            pids = b.pids()
            t0 = procfs.cpu_ticks(pids)
            r = run_wrk(ctx, tgt.url(), ctx.opts.calib_duration, 0)
            t1 = procfs.cpu_ticks(pids)
            if r["requests"] == 0 or (r["err_status"] + r["err_read"] + r["err_connect"]) > r["requests"] // 100:
                raise RuntimeError(f"calibration of {kind} backend: too many errors: {r}")
            res[kind] = {"cpu_us_per_req": (t1 - t0) / CLK_TCK * 1e6 / max(1, r["requests"]),
                         "rps": r["requests"] / (r["duration_us"] / 1e6), "loadavg": procfs.loadavg()}
            log(f"  calibrate {kind}: {res[kind]['cpu_us_per_req']:.2f} us/req, {res[kind]['rps']:.0f} req/s")
        finally:
            b.stop()
    return res
