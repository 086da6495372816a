"""The distribution pass: per proxy, the natural owner of every path (its unbounded variant,
swept with per-request ledgers at the backends), then how each workload spreads and how much of
it spills away from the owners on the bounded variant; and its part of the report."""

import json
from collections import Counter

from rondel_support.httpio import http_get

from .load import run_wrk
from .proxies import HAProxy, Nginx, Rondel


def owners_from(counts):
    """path -> backend that served it most (counts: {backend: Counter(path)})."""
    best = {}
    for name, c in counts.items():
        for path, n in c.items():
            if path not in best or n > best[path][1]:
                best[path] = (name, n)
    return {p: v[0] for p, v in best.items()}


def learn_owners(ctx, unb, b):
    """Sweeps the unbounded proxy `unb` until every path has been served (at most 5 sweeps);
    (owner of each path, number of paths served by more than one backend)."""
    b.truncate_ledgers()
    for _ in range(5):
        run_wrk(ctx, unb.url(), ctx.opts.sweep_duration, 0, mode="sweep")
        owner = owners_from(b.per_path_counts())
        if len(owner) >= ctx.opts.paths:
            break
    seen = Counter(p for c in b.per_path_counts().values() for p in c)
    return owner, sum(1 for n in seen.values() if n > 1)


def distribution(ctx, make_backends, workloads):
    """Per proxy: a sweep through the unbounded variant (natural owners), then each workload on
    the bounded variant (and on the unbounded one for comparison), with per-request ledgers.
    (rows, {"route_check": ..., "ambiguous": {proxy: paths}})."""
    rows = []
    route_check = None
    ambiguous = {}  # proxy -> paths the unbounded sweep saw on more than one backend
    b = make_backends(ledger=True)
    try:
        for cls in (Rondel, HAProxy, Nginx):
            unb = cls(ctx, b, bounded=False)
            owner, ambiguous[cls.name] = learn_owners(ctx, unb, b)
            for wl_name, zipf in workloads:
                b.truncate_ledgers()
                run_wrk(ctx, unb.url(), ctx.opts.duration, zipf, seed=7)
                rows.append(dist_row(cls.name, "unbounded", wl_name, b.per_path_counts(), owner, b.names))
            unb.stop()
            if cls is Nginx:
                continue  # nginx has no bounded-load option: its only variant is the one above
            bnd = cls(ctx, b, bounded=True, admin=(cls is Rondel))
            if cls is Rondel:
                route_check = check_routes(ctx, bnd, owner)
            for wl_name, zipf in workloads:
                b.truncate_ledgers()
                run_wrk(ctx, bnd.url(), ctx.opts.duration, zipf, seed=7)
                rows.append(dist_row(cls.name, "bounded 125", wl_name, b.per_path_counts(), owner, b.names))
            bnd.stop()
    finally:
        b.stop()
    return rows, {"route_check": route_check, "ambiguous": ambiguous}


def dist_row(proxy, variant, workload, counts, owner, names):
    per_backend = {n: sum(counts.get(n, Counter()).values()) for n in names}
    total = sum(per_backend.values())
    avg = total / len(names)
    moved = unknown = 0
    for name, c in counts.items():
        for path, n in c.items():
            o = owner.get(path)
            if o is None:
                unknown += n
            elif o != name:
                moved += n
    known = total - unknown
    return {"proxy": proxy, "variant": variant, "workload": workload, "requests": total,
            "per_backend": per_backend, "max_over_avg": (max(per_backend.values()) / avg) if avg else 0,
            "spill": moved / known if known else 0, "owner_paths": len(owner),
            "unknown_owner_requests": unknown}


def check_routes(ctx, proxy, owner, sample=200):
    """Compare rondel's own view of each key's first preference (/api/route) with the owner
    learnt from the unbounded sweep, for `sample` paths. Backend ids are host:port."""
    agree = total = 0
    paths = ctx.opts.paths
    for i in range(1, paths + 1, max(1, paths // sample)):
        path = f"/obj/{i}"
        if path not in owner:
            continue
        doc = json.loads(http_get(proxy.admin_port, f"/api/route?pool=p&key={path}", timeout=5)[2])
        first = doc["preference"][0]["id"]
        total += 1
        agree += ctx.port_to_name.get(first) == owner[path]
    return {"agree": agree, "total": total}


def distribution_lines(dist_rows, checks):
    """The distribution part of the main report (markdown lines; none without rows/checks)."""
    out = []
    if dist_rows:
        out += ["", "Distribution (separate pass with per-request ledgers at the backends; "
                "spill = share of requests served by a backend other than the one the same "
                "proxy's unbounded variant serves that path from):", "",
                "| workload | proxy | variant | requests | per-backend requests | max/avg | spill |",
                "|---|---|---|---|---|---|---|"]
        for d in dist_rows:
            out.append(f"| {d['workload']} | {d['proxy']} | {d['variant']} | {d['requests']:,} | "
                       + " / ".join(str(v) for v in d["per_backend"].values())
                       + f" | {d['max_over_avg']:.2f} | {d['spill'] * 100:.1f}% |")
        unknown = sum(d["unknown_owner_requests"] for d in dist_rows)
        out.append("")
        out.append("Paths with a learnt owner: " + ", ".join(
            sorted({f"{d['proxy']} {d['owner_paths']}" for d in dist_rows}))
                   + f"; requests to paths with no learnt owner (excluded from spill): {unknown}.")
    if checks:
        out.append("Paths the unbounded sweep saw served by more than one backend: " + ", ".join(
            f"{k} {v}" for k, v in checks["ambiguous"].items()) + ".")
    if (checks or {}).get("route_check"):
        rc = checks["route_check"]
        out.append(f"rondel /api/route first preference agrees with the unbounded sweep's owner "
                   f"for {rc['agree']}/{rc['total']} sampled paths.")
    return out
