"""The benchmark's backends: rondel-test-backend (one process for all, joined by --and, or one
process each) or one nginx process with a `return 200` server per backend. Each answers with
its own name (X-Backend: bN) and can write a per-request ledger for the distribution pass."""

import os
import signal
import subprocess

from rondel_support import httpio, ledger, ports, procfs
from rondel_support.daemons import TestBackendGroup

from .context import CLIENT_CORE


def _ledger_paths(ctx, names, wanted):
    """{name: fresh ledger path in the workdir} when `wanted`, else {}."""
    if not wanted:
        return {}
    out = {}
    for name in names:
        path = os.path.join(ctx.workdir, f"ledger-{name}.txt")
        if os.path.exists(path):
            os.unlink(path)
        out[name] = path
    return out


class _Ledgers:
    """Per-backend ledgers: `ledgers` maps a backend name to its file."""

    def per_path_counts(self):
        """{backend name: Counter(path -> requests)} from the ledgers."""
        return {name: ledger.target_counts(path) for name, path in self.ledgers.items()}

    def truncate_ledgers(self):
        for path in self.ledgers.values():
            if os.path.exists(path):
                os.truncate(path, 0)


class TestBackends(_Ledgers):
    """rondel-test-backend: one process serving every backend on one event loop (`--and`), as
    the nginx backends do, or (each=True) one process per backend. Ports from port 0, read back
    from each process's "listening" lines."""

    def __init__(self, ctx, n, ledger=False, core=CLIENT_CORE, each=False):
        self.ctx = ctx
        self.kind = "test-each" if each else "test"
        self.names = [f"b{i + 1}" for i in range(n)]
        self.ledgers = _ledger_paths(ctx, self.names, ledger)

        def member_args(name):
            return ["--ledger", self.ledgers[name]] if name in self.ledgers else []
        groups = [[name] for name in self.names] if each else [self.names]
        self.processes = [TestBackendGroup(g, binary=ctx.backend_bin, registry=ctx.registry,
                                           member_args=member_args, prefix=ctx.prefix(core))
                          for g in groups]
        self.procs = [b.proc for b in self.processes]
        self.ports = [port for b in self.processes for port in b.ports]
        for name, port in zip(self.names, self.ports):
            ctx.port_to_name[f"127.0.0.1:{port}"] = name

    def pids(self):
        return [p.pid for p in self.procs]

    def stop(self):
        for b in self.processes:
            b.stop()


NGINX_BACKENDS_CONF = """
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    default_type text/plain;
    log_format ledger '- $request_method $request_uri 0';
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    {servers}
}}
"""

NGINX_BACKEND_SERVER = """
    server {{
        listen 127.0.0.1:{port};
        {alog}
        keepalive_requests 100000000;
        location / {{ add_header X-Backend {name}; return 200 "{name}\\n"; }}
    }}"""


class NginxBackends(_Ledgers):
    """One nginx process (1 worker) with one `return 200` server per backend. nginx takes over
    listening sockets held on port 0 (ports.HeldListener) instead of binding the ports itself."""
    kind = "nginx"

    def __init__(self, ctx, n, ledger=False, core=CLIENT_CORE):
        self.ctx = ctx
        self.names = [f"b{i + 1}" for i in range(n)]
        self.ledgers = _ledger_paths(ctx, self.names, ledger)
        held = [ports.HeldListener() for _ in self.names]
        self.ports = [h.port for h in held]
        for name, port in zip(self.names, self.ports):
            ctx.port_to_name[f"127.0.0.1:{port}"] = name
        d = os.path.join(ctx.workdir, "nginx-backends")
        os.makedirs(d, exist_ok=True)
        servers = [NGINX_BACKEND_SERVER.format(
            port=port, name=name,
            alog=f"access_log {self.ledgers[name]} ledger;" if name in self.ledgers else "access_log off;")
            for name, port in zip(self.names, self.ports)]
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(NGINX_BACKENDS_CONF.format(d=d, servers="".join(servers)))
        try:
            self.proc = ctx.registry.popen(
                ctx.prefix(core) + ["nginx", "-p", d, "-e", f"{d}/error.log", "-c", path],
                env=ports.nginx_inherit_env(held), pass_fds=[h.fd for h in held],
                stdout=subprocess.DEVNULL)
        finally:
            for h in held:
                h.close()
        for port in self.ports:
            httpio.wait_http(port, alive=lambda: self.proc.poll() is None)

    def pids(self):
        return procfs.proc_tree(self.proc.pid)

    def stop(self):
        self.ctx.registry.stop(self.proc, signal.SIGQUIT)
