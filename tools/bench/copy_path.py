"""The copy path's cost per byte, two rondel builds side by side: `copy_path.py BEFORE AFTER
[SIZE]`. Each build runs a TLS listener in front of one plain rondel-test-backend serving SIZE
(default 4 MiB) bodies; curl fetches N (env, default 100) of them per round on one keep-alive
connection (env UPLOAD=1: uploads them with -T; CHUNKED=1: the backend answers chunked), the
builds alternating for ROUNDS (env, default 4) rounds each. Prints rondel's CPU (utime + stime)
and read/write syscalls (syscr + syscw) per GiB, per round and the medians, and the after/before
ratio of the CPU medians. Ratios only: run both builds in one run (docs/benchmarks.md)."""
import os, subprocess, sys, time, tempfile, re
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
sys.path.insert(0, HERE)
from rondel_bench.tls import make_cert
d = tempfile.mkdtemp(prefix="rondel-copy-path-")
cert, key, _ = make_cert(d)
BE = os.environ.get("RONDEL_TEST_BACKEND", os.path.join(HERE, "..", "..", "build", "tools", "test_backend", "rondel-test-backend"))
SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 4 << 20
be = subprocess.Popen([BE, "--size", str(SIZE)] + (["--chunked"] if os.environ.get("CHUNKED") else []), stdout=subprocess.PIPE, text=True)
baddr = be.stdout.readline().split()[1]
HZ = os.sysconf("SC_CLK_TCK")
UPFILE = os.path.join(d, "up.bin")
open(UPFILE, "wb").write(os.urandom(SIZE))

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ

def sysc(pid):
    f = dict(l.split(":") for l in open(f"/proc/{pid}/io"))
    return int(f["syscr"]) + int(f["syscw"])

def start(binary, tag):
    conf = os.path.join(d, f"{tag}.yaml")
    open(conf, "w").write(f"""listeners:
  - name: web
    bind: 127.0.0.1:0
    pool: p
    tls:
      certificates:
        - {{ cert: {cert}, key: {key} }}
pools:
  - name: p
    backends:
      - {{ address: {baddr} }}
log:
  level: info
""")
    p = subprocess.Popen([binary, "-f", conf], stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.monotonic() + 10
    while port is None and time.monotonic() < deadline:
        line = p.stderr.readline()
        m = re.search(r"name=web addr=[^ ]*:(\d+)", line)
        if m: port = int(m.group(1))
    if port is None: raise SystemExit("no port")
    return p, port

import atexit
procs = {}
atexit.register(lambda: [p.terminate() for p, _ in procs.values()] + [be.terminate()])
procs.update({t: start(b, t) for t, b in (("before", sys.argv[1]), ("after", sys.argv[2]))})
N = int(os.environ.get('N', 100))
res = {t: [] for t in procs}
calls = {t: [] for t in procs}
for rnd in range(int(os.environ.get("ROUNDS", 4))):
    for t in (("before", "after") if rnd % 2 == 0 else ("after", "before")):
        p, port = procs[t]
        urls = [f"https://127.0.0.1:{port}/o{rnd}_{i}" for i in range(N)]
        c0, s0 = cpu(p.pid), sysc(p.pid)
        up = os.environ.get("UPLOAD")
        if up:
            args = [a for u in urls for a in ("-T", UPFILE, "-o", "/dev/null", u)]
        else:
            args = [a for u in urls for a in ("-o", "/dev/null", u)]
        out = subprocess.run(["curl", "-k", "-s", "-w", "%{size_upload}\n" if up else "%{size_download}\n", *args],
                             capture_output=True, text=True, check=True).stdout.split()
        c1, s1 = cpu(p.pid), sysc(p.pid)
        got = sum(int(x) for x in out)
        assert got == N * SIZE, (got, N * SIZE)
        res[t].append((c1 - c0) / (got / (1 << 30)))
        calls[t].append((s1 - s0) / (got / (1 << 30)))
for t, v in res.items():
    v.sort(); print(t, "cpu s/GiB per round:", " ".join(f"{x:.3f}" for x in v), "median", f"{v[len(v)//2]:.3f}")
for t, v in calls.items():
    v.sort(); print(t, "read+write syscalls per GiB, median", f"{v[len(v)//2]:.0f}")
b = sorted(res["before"]); a = sorted(res["after"])
print("ratio after/before (medians):", f"{a[len(a)//2] / b[len(b)//2]:.3f}")
for p, _ in procs.values(): p.terminate(); p.wait()
be.terminate(); be.wait()
