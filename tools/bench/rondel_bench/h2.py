"""The HTTP/2 pass: rondel (`tls: {alpn: [h2, http/1.1]}`), HAProxy (`bind ... ssl crt FILE alpn
h2,http/1.1`) and nginx (`listen ... ssl http2`), one worker/thread each on core 0, the TLS
pass's ECDSA P-256 certificate, in front of the same backends, measured in turn (the order
rotated each rep): h2load on core 1, H2_CONNS connections of H2_STREAMS concurrent streams each
(`h2load -c 10 -m 10 -t 1 -D S`), over TLS with ALPN h2, on two bodies, each body on every
proxy before the next body: the bench's small object (GET /obj/I, the test backend's name and a
newline) and 256 KiB (GET /obj/I?size=262144, the test backend's per-request size). Per proxy:
req/s and the proxy's CPU per request from /proc.

The proxies, the certificate, the TLS wait and the CPU measurement are the TLS pass's (tls.py).
"""

import os
import re
import subprocess
from collections import defaultdict

from .context import CLIENT_CORE, log
from .profile import syscall_counts, syscall_table
from .report import fmt_range, med, ratio
from .tls import (TLS13_SUITE, TlsHAProxy, TlsNginx, TlsProxy, TlsRondel, make_cert,
                  proxy_cpu_split)

H2_CONNS = 10
H2_STREAMS = 10
# (body, query appended to /obj/I): the test backend answers ?size=N with an N-byte body.
BODIES = (("small", ""), ("256 KiB", f"?size={256 << 10}"))
ALPN_RONDEL = "      alpn: [h2, http/1.1]\n"


class H2Rondel(TlsRondel):
    def config_text(self, backends, bounded, admin):
        text = super().config_text(backends, bounded, admin)
        return text.replace("    tls:\n", "    tls:\n" + ALPN_RONDEL, 1)


class H2HAProxy(TlsHAProxy):
    def argv(self, backends, bounded, held):
        argv, env = super().argv(backends, bounded, held)
        path = os.path.join(self.dir, "haproxy.cfg")
        with open(path) as f:
            conf = f.read()
        self.write("haproxy.cfg", conf.replace(f" ciphersuites {TLS13_SUITE}\n",
                                               f" ciphersuites {TLS13_SUITE} alpn h2,http/1.1\n"))
        return argv, env


class H2Nginx(TlsNginx):
    def argv(self, backends, bounded, held):
        argv, env = super().argv(backends, bounded, held)
        path = os.path.join(self.dir, "nginx.conf")
        with open(path) as f:
            conf = f.read()
        self.write("nginx.conf", conf.replace(f"listen 127.0.0.1:{held.port} ssl;\n",
                                              f"listen 127.0.0.1:{held.port} ssl http2;\n"))
        return argv, env


KINDS = (H2Rondel, H2HAProxy, H2Nginx)
FINISHED = re.compile(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s")
REQUESTS = re.compile(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored, (\d+) timeout")
STATUS = re.compile(r"status codes: (\d+) 2xx")
TRAFFIC = re.compile(r"traffic: .*?\((\d+)\) total")
PROTOCOL = re.compile(r"Application protocol: (\S+)")
CIPHER = re.compile(r"Cipher: (\S+)")


def h2load_result(out):
    """h2load's summary as a dict: seconds, rps, succeeded, errors (failed + errored + timeout),
    ok_2xx, bytes (total traffic), protocol (the ALPN it got; None if it negotiated none), cipher
    (the TLS suite; None if h2load printed none)."""
    f, r = FINISHED.search(out), REQUESTS.search(out)
    if not f or not r:
        raise RuntimeError(f"h2load gave no summary: {out[-600:]}")
    n = [int(x) for x in r.groups()]
    s, t, p = STATUS.search(out), TRAFFIC.search(out), PROTOCOL.search(out)
    c = CIPHER.search(out)
    return {"seconds": float(f.group(1)) / (1000 if f.group(2) == "ms" else 1),
            "rps": float(f.group(3)), "succeeded": n[3], "errors": n[4] + n[5] + n[6],
            "ok_2xx": int(s.group(1)) if s else 0, "bytes": int(t.group(1)) if t else 0,
            "protocol": p.group(1) if p else None, "cipher": c.group(1) if c else None}


def uri_file(d, port, query, paths):
    """A file of `paths` URIs (/obj/1..N with `query`) for h2load -i; each client takes them in
    order."""
    path = os.path.join(d, f"uris-{port}-{'big' if query else 'small'}.txt")
    with open(path, "w") as f:
        f.writelines(f"https://127.0.0.1:{port}/obj/{i}{query}\n" for i in range(1, paths + 1))
    return path


def h2load(ctx, proxy, query, duration, paths, core=CLIENT_CORE, warm_up=True):
    """h2load -c H2_CONNS -m H2_STREAMS -t 1 for `duration` s against proxy (pinned to `core`;
    None: unpinned), after a 1 s warm-up unless not `warm_up`; h2load_result plus the proxy's
    CPU per request."""
    uris = uri_file(proxy.dir, proxy.port, query, paths)

    def run(secs):
        # Only the suite every proxy is given (tls.TLS13_SUITE); h2_pass checks it was the one.
        argv = ctx.prefix(core) + ["h2load", "-c", str(H2_CONNS), "-m", str(H2_STREAMS), "-t",
                                   "1", "-D", str(secs), f"--tls13-ciphers={TLS13_SUITE}",
                                   "-i", uris]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=secs + 60)
        return out.stdout + out.stderr
    if warm_up:
        run(1)
    out, wall, user_s, sys_s = proxy_cpu_split(proxy, lambda: run(duration))
    r = h2load_result(out)
    n = max(1, r["succeeded"])
    r["cpu_us_per_req"] = (user_s + sys_s) * 1e6 / n
    r["user_us_per_req"], r["sys_us_per_req"] = user_s * 1e6 / n, sys_s * 1e6 / n
    r["cpu_busy"] = (user_s + sys_s) / wall
    return r


def h2_pass(ctx, make_backends):
    """{body: {proxy: [result per rep]}}: each rep starts every proxy (with the TLS pass's
    certificate; an idle proxy uses no CPU), then runs each body on every proxy in turn, the
    order rotated each rep, so that the runs a ratio compares are next to each other in time
    (this machine's speed drifts within seconds: see docs/benchmarks.md)."""
    opts = ctx.opts
    d = os.path.join(ctx.workdir, "h2")
    os.makedirs(d, exist_ok=True)
    TlsProxy.cert, TlsProxy.key, TlsProxy.both = make_cert(d)
    results = defaultdict(lambda: defaultdict(list))
    b = make_backends()
    try:
        for rep in range(opts.reps):
            order = KINDS[rep % len(KINDS):] + KINDS[:rep % len(KINDS)]
            proxies = []
            try:
                for kind in order:
                    proxies.append(kind(ctx, b))
                for body, query in BODIES:
                    for p in proxies:
                        r = h2load(ctx, p, query, opts.duration, opts.paths)
                        if p.proc.poll() is not None:
                            raise RuntimeError(f"{p.name} exited ({p.proc.returncode}) during "
                                               f"the {body} run; see {p.dir}")
                        if r["protocol"] != "h2":
                            raise RuntimeError(f"{p.name}: h2load negotiated {r['protocol']}, "
                                               "not h2")
                        if r["cipher"] != TLS13_SUITE:
                            raise RuntimeError(f"{p.name}: h2load negotiated {r['cipher']}, "
                                               f"not {TLS13_SUITE}")
                        results[body][p.name].append(r)
                        log(f"  h2 rep {rep + 1} {p.name:8} {body:8} {r['rps']:,.0f} req/s "
                            f"{r['cpu_us_per_req']:.1f} us/req, {r['errors']} errors")
                if rep == opts.reps - 1 and os.environ.get("BENCH_H2_BREAKDOWN"):
                    breakdown(ctx, proxies, opts, int(os.environ["BENCH_H2_BREAKDOWN"]))
            finally:
                for p in proxies:
                    p.stop()
    finally:
        b.stop()
    return {body: dict(v) for body, v in results.items()}


def breakdown(ctx, proxies, opts, seconds):
    """BENCH_H2_BREAKDOWN=S: after the last rep, for each body, the syscalls each proxy makes per
    response under h2load for S seconds (perf stat), and the bytes each write carries (TLS
    records go out in writes: bytes per write over the records' 16 KiB payload bound them).
    Logged as tables."""
    for body, query in BODIES:
        tables, order = {}, []
        for p in proxies:
            result = {}

            def load(p=p, result=result):
                result.update(h2load(ctx, p, query, seconds, opts.paths, warm_up=False))
                return {"requests": result["succeeded"], "bytes": result["bytes"]}
            counts, r = syscall_counts(ctx, p.pids(), None, None, load=load)
            tables[p.name] = (counts, r)
            order.append(p.name)
            writes = sum(counts.get(k, 0) for k in ("write", "writev", "sendto", "sendmsg"))
            log(f"  h2 breakdown {p.name:8} {body:8}: {r['requests']:,} responses, "
                f"{writes / max(1, r['requests']):.2f} writes and "
                f"{r['bytes'] / max(1, writes):,.0f} bytes per write (h2load's traffic)")
        log(f"  h2 syscalls per response, {body} (perf stat -e 'syscalls:sys_enter_*', {seconds} s)")
        for line in syscall_table(tables, order):
            log("    " + line)


def _h2load_version():
    try:
        out = subprocess.run(["h2load", "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "h2load ?"


TARGET = 0.9  # issue 16: rondel's CPU per request at most 0.9 × HAProxy's, for both bodies


def h2_section(results, args, version=None):
    out = ["## HTTP/2", "",
           f"{version or _h2load_version()}: `h2load -c {H2_CONNS} -m {H2_STREAMS} -t 1 "
           f"-D {args.duration} --tls13-ciphers={TLS13_SUITE}` over TLS 1.3 with ALPN h2 "
           f"(every proxy on {TLS13_SUITE}) on core 1, {args.paths} paths "
           f"in order per client; one worker/thread per proxy on core 0, the TLS pass's ECDSA "
           f"P-256 certificate, {args.backends} test backends on core 1. Bodies: small "
           f"(GET /obj/I) and 256 KiB (GET /obj/I?size=262144). {args.reps} reps; in each, every "
           "proxy runs the small body in turn, then the 256 KiB body, the order rotated each "
           "rep; medians, (min–max) over reps; ratios to HAProxy's medians of the same run.", "",
           "| body | proxy | req/s | CPU µs/req | proxy busy | errors | req/s ÷ HAProxy "
           "| CPU/req ÷ HAProxy |",
           "|---|---|---|---|---|---|---|---|"]
    m = {}
    for body, by_proxy in results.items():
        ha = by_proxy.get("haproxy")
        for name, runs in by_proxy.items():
            rps, cpu = [r["rps"] for r in runs], [r["cpu_us_per_req"] for r in runs]
            m[body, name] = med(cpu)
            out.append("| " + " | ".join([
                body, name, fmt_range(rps, lambda x: f"{x:,.0f}"),
                fmt_range(cpu, lambda x: f"{x:.1f}"),
                fmt_range([r["cpu_busy"] * 100 for r in runs], lambda x: f"{x:.0f}%"),
                str(sum(r["errors"] for r in runs)),
                ratio(med(rps), med([r["rps"] for r in ha])) if ha else "n/a",
                ratio(med(cpu), med([r["cpu_us_per_req"] for r in ha])) if ha else "n/a"]) + " |")
    out += ["", f"Target (issue 16): rondel's CPU per request ≤ {TARGET} × HAProxy's, rondel ÷ "
            "HAProxy in this run, as the ratio of the medians and as the median of each rep's "
            "own ratio (the two runs of a rep are next to each other in time); met when both "
            "are:", "", "| body | rondel ÷ HAProxy (medians) | each rep | median of reps | met |",
            "|---|---|---|---|---|"]
    for body, by_proxy in results.items():
        if (body, "rondel") not in m or not m.get((body, "haproxy")):
            out.append(f"| {body} | n/a | n/a | n/a | n/a |")
            continue
        x = m[body, "rondel"] / m[body, "haproxy"]
        paired = paired_ratios(by_proxy["rondel"], by_proxy["haproxy"])
        y = med(paired) if paired else float("inf")
        met = "yes" if x <= TARGET and y <= TARGET else "no"
        out.append(f"| {body} | {x:.2f} | {', '.join(f'{r:.2f}' for r in paired)} | "
                   f"{y:.2f} | {met} |")
    return "\n".join(out + split_section(results)) + "\n"


def split_section(results):
    """Where each proxy's CPU goes, user space and kernel (the ticks /proc charges to each mode),
    and the user time 0.9 × HAProxy's total leaves rondel with its kernel time as measured."""
    if not all("user_us_per_req" in r for v in results.values() for rs in v.values() for r in rs):
        return []  # results from before the split was recorded
    out = ["", "Where the CPU goes (medians over reps, /proc's user and system ticks):", "",
           "| body | proxy | user µs/req | system µs/req | user ÷ HAProxy | system ÷ HAProxy |",
           "|---|---|---|---|---|---|"]
    need = []
    for body, by_proxy in results.items():
        ha = by_proxy.get("haproxy")
        hu = med([r["user_us_per_req"] for r in ha]) if ha else 0
        hs = med([r["sys_us_per_req"] for r in ha]) if ha else 0
        for name, runs in by_proxy.items():
            u = med([r["user_us_per_req"] for r in runs])
            s = med([r["sys_us_per_req"] for r in runs])
            out.append(f"| {body} | {name} | {u:.1f} | {s:.1f} | "
                       f"{ratio(u, hu) if ha else 'n/a'} | {ratio(s, hs) if ha else 'n/a'} |")
            if name == "rondel" and hu > 0:
                left = TARGET * (hu + hs) - s
                need.append(f"{body}: {TARGET} × HAProxy's {hu + hs:.1f} µs, less rondel's "
                            f"{s:.1f} µs in the kernel, leaves {left:.1f} µs of user time, "
                            f"{left / hu:.2f} × HAProxy's {hu:.1f} (rondel used {u:.1f}, "
                            f"{u / hu:.2f} ×)")
    if need:
        out += ["", "The target in user-space terms, from these medians:", ""]
        out += [f"- {x}" for x in need]
    return out


def paired_ratios(rondel, haproxy):
    """rondel's CPU per request ÷ HAProxy's, rep by rep (runs of one rep, in order)."""
    return [a["cpu_us_per_req"] / b["cpu_us_per_req"] for a, b in zip(rondel, haproxy)
            if b["cpu_us_per_req"] > 0]
