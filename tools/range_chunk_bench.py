#!/usr/bin/env python3
"""Range-chunk keys measured through the daemon (docs/routing.md, "Range-chunk keys").

OBJECTS objects of OBJECT_MIB MiB each are fetched by CLIENTS clients in 1 MiB ranges through
rondel from 4 test backends, once with the pool keyed by path only and once with range_chunk.
Each backend models a cache of 1 MiB blocks (--cache-block) holding a quarter of the bytes
fetched, so the four caches together could hold everything if the bytes were spread evenly.
Per object RANGES ranges are fetched (offsets every OBJECT_MIB/RANGES MiB, bounding the run),
twice: pass 1 fills the caches, pass 2 (another order) shows what they kept.
Reports per-backend byte share (max/avg) and the cache misses of each pass.

  python3 tools/range_chunk_bench.py [--build build] [--objects 20] [--object-mib 256]
      [--ranges 64] [--chunk-mib 4] [--clients 4] [--no-hot-keys] [--json]
"""
import argparse
import json
import os
import random
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "pylib"))
from rondel_support import config, daemons, httpio, procs  # noqa: E402

MIB = 1 << 20


def stats(port):
    return json.loads(httpio.http_get(port, "/_stats")[2])


def run_pass(port, plan, clients):
    """Fetches every (target, offset) of `plan` split over `clients` connections."""
    errors = []

    def client(part):
        try:
            with httpio.HttpConn(port, timeout=60) as c:
                for target, off in part:
                    c.request("GET", target, headers={"Range": f"bytes={off}-{off + MIB - 1}"})
                    status, _, body = c.read_response()
                    if status != 206 or len(body) != MIB:
                        errors.append((target, off, status, len(body)))
        except Exception as e:  # reported below: a benchmark with failures is not a result
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(plan[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"failed requests: {errors[:5]}")


def measure(args, chunk_bytes, registry):
    fetched_mib = args.objects * args.ranges
    cache_blocks = max(1, fetched_mib // 4)
    backend_bin = os.path.join(args.build, "tools/test_backend/rondel-test-backend")
    rondel_bin = os.path.join(args.build, "src/server/rondel")
    names = [f"b{i}" for i in range(4)]
    group = daemons.TestBackendGroup(
        names, "--size", str(args.object_mib * MIB), "--cache-objects", str(cache_blocks),
        "--cache-block", str(MIB), binary=backend_bin, registry=registry)
    pool = {"hash_key": "path"}
    if args.no_hot_keys:
        pool["hot_keys"] = "{share: 0}"
    if chunk_bytes:
        pool["range_chunk"] = chunk_bytes
    backends = [{"address": m.address, "id": m.name} for m in group.members]
    rondel = daemons.Rondel(config.make_config(backends, pool=pool), binary=rondel_bin,
                            registry=registry)
    try:
        stride = args.object_mib * MIB // args.ranges
        plan = [(f"/obj/{o}", r * stride) for o in range(args.objects) for r in range(args.ranges)]
        rng = random.Random(1)
        out = {"range_chunk_mib": chunk_bytes // MIB if chunk_bytes else 0, "passes": []}
        for p in range(2):
            rng.shuffle(plan)
            for port in group.ports:
                if p == 0:
                    httpio.http_get(port, "/_reset")
            before = [stats(port) for port in group.ports]
            run_pass(rondel.port, plan, args.clients)
            after = [stats(port) for port in group.ports]
            bytes_out = [a["bytes_out"] - b["bytes_out"] for a, b in zip(after, before)]
            misses = sum(a["misses"] - b["misses"] for a, b in zip(after, before))
            avg = sum(bytes_out) / len(bytes_out)
            out["passes"].append({"bytes_per_backend_mib": [b // MIB for b in bytes_out],
                                  "max_over_avg": round(max(bytes_out) / avg, 3),
                                  "misses": misses, "requests": len(plan)})
        out["cache_blocks_per_backend"] = cache_blocks
        return out
    finally:
        rondel.stop()
        group.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--objects", type=int, default=20)
    ap.add_argument("--object-mib", type=int, default=256)
    ap.add_argument("--ranges", type=int, default=64, help="1 MiB ranges fetched per object")
    ap.add_argument("--chunk-mib", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--no-hot-keys", action="store_true",
                    help="hot_keys share 0: no hot-key replicas (by default a whole object that "
                         "is 1/OBJECTS of the requests is hot and replicated)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    registry = procs.ProcessRegistry()
    try:
        results = [measure(args, 0, registry), measure(args, args.chunk_mib * MIB, registry)]
    finally:
        registry.kill_all()
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"{args.objects} objects x {args.object_mib} MiB, {args.ranges} ranges of 1 MiB per "
          f"object, 4 backends, cache {results[0]['cache_blocks_per_backend']} MiB per backend, "
          f"hot keys {'off' if args.no_hot_keys else 'on (default)'}")
    print("%-18s %-26s %-8s %-14s %-14s" % ("placement", "MiB per backend (pass 1)", "max/avg",
                                           "misses pass 1", "misses pass 2"))
    for r in results:
        label = f"range_chunk {r['range_chunk_mib']}MiB" if r["range_chunk_mib"] else "path only"
        p1, p2 = r["passes"]
        print("%-18s %-26s %-8s %-14s %-14s" % (label, p1["bytes_per_backend_mib"],
                                               p1["max_over_avg"], p1["misses"], p2["misses"]))


if __name__ == "__main__":
    main()
