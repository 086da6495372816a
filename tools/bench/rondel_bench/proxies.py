"""The proxies under test, each started on port 0 with a generated configuration: rondel (its
ports read back from its log lines), HAProxy (`bind fd@N` on a socket held on port 0) and nginx
(which takes over such a socket through its NGINX environment variable); NoProxy is wrk straight
at the first backend."""

import os
import signal
import subprocess

from rondel_support import config, daemons, httpio, ports, procfs

from .context import PROXY_CORE


# nginx 1.22 with `hash $request_uri consistent`, one worker, keep-alive to the backends.
# The idle-connection pass raises worker_connections and adds worker_rlimit_nofile; with the
# defaults the text is the throughput configuration documented in docs/benchmarks.md.
def nginx_conf(port, ports_, d, worker_connections=4096, rlimit_nofile=None, extra_location=""):
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in ports_)
    rlimit = f"worker_rlimit_nofile {rlimit_nofile};\n" if rlimit_nofile else ""
    return f"""worker_processes 1;
{rlimit}daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections {worker_connections}; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream up {{
        hash $request_uri consistent;
{servers}
        keepalive 64;
        keepalive_requests 100000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        keepalive_requests 100000000;
        location / {{
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";{extra_location}
        }}
    }}
}}
"""


def haproxy_conf(bind, servers, balance, factor=None, nbthread=1, maxconn="4096",
                 extra_defaults="", extra_global=""):
    """The HAProxy configuration of bench.py and routing_bench.py: keep-alive on both sides,
    `http-reuse always`, consistent hashing with `balance`. bind: the frontend's bind address
    (e.g. "fd@3" for a held socket); servers: (name, port) pairs; factor: the
    hash-balance-factor line (None: unbounded, no line); extra_defaults, extra_global: lines
    appended to the defaults / global section (e.g. "    option splice-auto\n")."""
    lines = "\n".join(f"    server {n} 127.0.0.1:{p}" for n, p in servers)
    bound = f"    hash-balance-factor {factor}" if factor is not None else ""
    return f"""global
    nbthread {nbthread}
    maxconn {maxconn}
{extra_global}
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 60s
{extra_defaults}
frontend fe
    bind {bind}
    default_backend be

backend be
    balance {balance}
    hash-type consistent
{bound}
{lines}
"""


def start_held(registry, argv_for, prefix, stderr_path, name, wait=True):
    """Starts a daemon that listens on a socket held on port 0 (ports.HeldListener):
    argv_for(held) gives (argv, env or None); its stderr goes to stderr_path. Waits until it
    answers HTTP unless not `wait` (a TLS listener: the caller waits). (Popen, port)."""
    held = ports.HeldListener()
    argv, env = argv_for(held)
    try:
        with open(stderr_path, "w") as err:
            proc = registry.popen(list(prefix) + argv, env=env, pass_fds=[held.fd],
                                  stdout=subprocess.DEVNULL, stderr=err)
    finally:
        held.close()
    if not wait:
        return proc, held.port
    try:
        httpio.wait_http(held.port, alive=lambda: proc.poll() is None)
    except RuntimeError as e:
        raise RuntimeError(f"{name}: {e}; see {stderr_path}") from None
    return proc, held.port


class Proxy:
    """A proxy process in front of `backends`. idle > 0: the idle-connection pass, which holds
    `idle` client connections open; each proxy's connection and fd limits are raised for it
    (and only for it). workers: rondel's `workers`, HAProxy's `nbthread` (> 1 only in the
    workers pass, which also starts the proxy unpinned: core None)."""
    name = "?"
    stop_signal = signal.SIGTERM

    def __init__(self, ctx, backends, bounded=True, admin=False, idle=0, workers=1,
                 core=PROXY_CORE):
        self.ctx = ctx
        self.idle = idle
        self.workers = workers
        self.admin_port = None
        self.dir = os.path.join(ctx.workdir, f"{self.name}-{'b' if bounded else 'u'}"
                                + (f"-w{workers}" if workers != 1 else ""))
        os.makedirs(self.dir, exist_ok=True)
        self.start(backends, bounded, admin, ctx.prefix(core))

    def start(self, backends, bounded, admin, prefix):
        """Starts the process on a held port 0 socket; sets self.proc and self.port."""
        self.proc, self.port = start_held(
            self.ctx.registry, lambda held: self.argv(backends, bounded, held), prefix,
            os.path.join(self.dir, "stderr.txt"), self.name)

    def pids(self):
        return procfs.proc_tree(self.proc.pid)

    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def write(self, fname, text):
        return config.write_file(os.path.join(self.dir, fname), text)

    def stop(self):
        self.ctx.registry.stop(self.proc, self.stop_signal)


class Rondel(Proxy):
    name = "rondel"
    DEFAULT_MAX_CONNECTIONS = 10000  # the listener's default (docs/configuration.md)

    def config_text(self, backends, bounded, admin):
        """workers, a web listener on port 0 -> pool p (ring, hash_key uri, bounded or not),
        log level info (rondel logs its ports at info; nothing per request), no access log."""
        listener = {}
        if self.idle and self.idle + 100 > self.DEFAULT_MAX_CONNECTIONS:
            listener["max_connections"] = self.idle + 100
        return config.make_config(
            [{"address": f"127.0.0.1:{port}"} for port in backends.ports],
            top={"workers": self.workers, "drain_timeout": "1s"}, listener=listener,
            pool={"algorithm": "ring", "hash_key": "uri",
                  "balance_factor": 125 if bounded else 0},
            admin=admin, log={"access_log": "", "level": "info"})

    def binary(self):
        return self.ctx.rondel_bin

    def start(self, backends, bounded, admin, prefix):
        if self.idle:
            # prlimit execs rondel, so the pid stays rondel's.
            prefix = prefix + ["prlimit", f"--nofile={self.idle + 1000}", "--"]
        try:
            self.daemon = daemons.Rondel(self.config_text(backends, bounded, admin),
                                         binary=self.binary(), registry=self.ctx.registry,
                                         workdir=self.dir, prefix=prefix)
        except AssertionError as e:
            raise RuntimeError(f"rondel did not start: {e}") from None
        self.proc = self.daemon.proc
        self.port = self.daemon.port
        self.admin_port = self.daemon.admin_port

    def stop(self):
        self.ctx.registry.stop(self.proc)
        with open(os.path.join(self.dir, "stderr.txt"), "w") as f:
            f.write("\n".join(self.daemon.lines()) + "\n")


class HAProxy(Proxy):
    name = "haproxy"
    extra_defaults = ""

    def argv(self, backends, bounded, held):
        # HAProxy sets its own RLIMIT_NOFILE from maxconn: maxsock = 2 x maxconn + a few (a
        # server-side fd per client connection). Only the idle pass needs maxconn > 4096; there
        # 2 x (N + 100) can exceed the hard limit (20000 on the build machine), which HAProxy
        # cannot raise without CAP_SYS_RESOURCE, and strict-limits (on by default since 2.3)
        # would make it exit. "no strict-limits" makes it warn and run with the hard limit:
        # idle client connections hold no server connection, so N + a few hundred fds suffice.
        maxconn = f"{max(4096, self.idle + 100)}\n    no strict-limits" if self.idle else "4096"
        conf = haproxy_conf(f"fd@{held.fd}", zip(backends.names, backends.ports), "uri",
                            factor=125 if bounded else None, nbthread=self.workers, maxconn=maxconn,
                            extra_defaults=self.extra_defaults)
        return ["haproxy", "-db", "-f", self.write("haproxy.cfg", conf)], None


class Nginx(Proxy):
    name = "nginx"
    stop_signal = signal.SIGQUIT
    extra_location = ""

    def argv(self, backends, bounded, held):
        d = self.dir
        if self.idle:
            wc = max(4096, self.idle + 1000)
            conf = nginx_conf(held.port, backends.ports, d, worker_connections=wc,
                              rlimit_nofile=wc + 1000)
        else:
            conf = nginx_conf(held.port, backends.ports, d, extra_location=self.extra_location)
        argv = ["nginx", "-p", d, "-e", f"{d}/error.log", "-c", self.write("nginx.conf", conf)]
        return argv, ports.nginx_inherit_env([held])


class HAProxySplice(HAProxy):
    """HAProxy with `option splice-auto`: it splices between its sockets when it judges it pays
    (the large-body pass's second HAProxy anchor)."""
    name = "haproxy-splice"
    extra_defaults = "    option splice-auto\n"


class NginxUnbuffered(Nginx):
    """nginx with `proxy_buffering off`: the response goes to the client as it arrives, never
    to a temporary file (the large-body pass)."""
    name = "nginx-nobuf"
    extra_location = "\n            proxy_buffering off;"


class RondelBaseline(Rondel):
    """Another rondel binary (e.g. main's build) beside the one under test: `baseline_bin` is set by
    the large-body pass's --bodies-baseline."""
    name = "rondel-base"
    baseline_bin = ""

    def binary(self):
        return self.baseline_bin


class NoProxy:
    """wrk straight at the first backend: the ceiling of the client core."""
    name = "none"

    def __init__(self, backends):
        self.port = backends.ports[0]

    def pids(self):
        return []

    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def stop(self):
        pass
