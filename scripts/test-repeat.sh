#!/usr/bin/env bash
# The flake hunt: runs the ctest suite of one build N times, optionally under CPU load, and
# reports every test that failed (with its output) and a per-test failure count at the end.
#
# Usage: scripts/test-repeat.sh [-n N] [-b BUILD_DIR] [-R REGEX] [-E REGEX] [-j JOBS] [--load]
#                               [--max-minutes M] [-o OUT_DIR]
#   -n N            runs (default 20)
#   -b DIR          the configured, built build directory (default build)
#   -R / -E REGEX   passed to ctest (only / exclude these tests)
#   -j JOBS         ctest parallelism (default 2: the machine has two cores)
#   --load          run under CPU load: `stress-ng --cpu 2` (Debian package stress-ng), started
#                   here and killed by its pid when the hunt ends, however it ends
#   --max-minutes M stop starting runs after M minutes (default 120); a run in progress when the
#                   budget is spent is stopped, and reported as cut short
#   -o DIR          where the logs go (default BUILD_DIR/test-repeat/<UTC time>)
# Exit status: 0 when every run passed, 1 when some test failed, 2 on a usage error.
# `make test-repeat N=20 [LOAD=1] [SANITIZE=1] [R=regex]` wraps this script.
set -uo pipefail

runs=20 build=build only="" exclude="" jobs=2 load=0 max_minutes=120 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -R) only=$2; shift 2 ;;
    -E) exclude=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    --load) load=1; shift ;;
    --max-minutes) max_minutes=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-repeat: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
usage_error() { echo "test-repeat: $*" >&2; exit 2; }
case "$runs$jobs$max_minutes" in *[!0-9]*) usage_error "-n, -j, --max-minutes take numbers" ;; esac
[ -f "$build/CTestTestfile.cmake" ] || usage_error "$build is not a built ctest tree"
build=$(cd "$build" && pwd)
out=${out:-$build/test-repeat/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"

filters=()
[ -n "$only" ] && filters+=(-R "$only")
[ -n "$exclude" ] && filters+=(-E "$exclude")

stress_pid=""
stop_stress() {
  if [ -n "$stress_pid" ] && kill -0 "$stress_pid" 2>/dev/null; then
    kill "$stress_pid" 2>/dev/null
    wait "$stress_pid" 2>/dev/null
  fi
  stress_pid=""
}
trap stop_stress EXIT
trap 'stop_stress; exit 130' INT TERM

budget_s=$((max_minutes * 60))
if [ "$load" -eq 1 ]; then
  command -v stress-ng >/dev/null ||
    usage_error "--load needs stress-ng (scripts/setup-deps.sh test)"
  # --timeout bounds the load even if this script is killed with SIGKILL.
  stress-ng --cpu 2 --timeout "$((budget_s + 60))s" --quiet &
  stress_pid=$!
  echo "test-repeat: CPU load: stress-ng --cpu 2 (pid $stress_pid)"
fi

echo "test-repeat: $runs runs of ctest -j $jobs ${filters[*]} in $build (load=$load), logs in $out"
start=$(date +%s)
done_runs=0
for i in $(seq 1 "$runs"); do
  left=$((budget_s - ($(date +%s) - start)))
  if [ "$left" -le 0 ]; then
    echo "test-repeat: time budget of $max_minutes min spent after $done_runs runs"
    break
  fi
  t0=$(date +%s)
  (cd "$build" && timeout --kill-after=30 "$left" ctest -j "$jobs" --output-on-failure \
      --output-junit "$out/run$i.xml" "${filters[@]}") > "$out/run$i.log" 2>&1
  rc=$?
  [ "$rc" -eq 124 ] && echo "run $i: cut short by the time budget" >> "$out/run$i.log"
  done_runs=$i
  summary=$(grep -E '^[0-9]+% tests passed' "$out/run$i.log" || echo "no ctest summary (rc $rc)")
  echo "run $i/$runs: $summary ($(( $(date +%s) - t0 )) s)"
done
stop_stress

# The report: each failed test with its output, then the per-test failure counts.
python3 - "$out" "$done_runs" <<'EOF'
import collections, glob, os, re, sys
import xml.etree.ElementTree as ET

out, runs = sys.argv[1], int(sys.argv[2])
fails = collections.Counter()
seen = collections.Counter()
report = []
for i in range(1, runs + 1):
    xml = os.path.join(out, f"run{i}.xml")
    if not os.path.exists(xml):
        report.append(f"run {i}: no JUnit file (ctest cut short?); see {out}/run{i}.log")
        fails["(run cut short)"] += 1
        continue
    for tc in ET.parse(xml).getroot().iter("testcase"):
        name = tc.get("name")
        status = tc.get("status", "")
        if status in ("notrun", "disabled"):
            continue
        seen[name] += 1
        if tc.find("failure") is not None or status == "fail":
            fails[name] += 1
            text = tc.findtext("system-out") or ""
            report.append(f"==== run {i}: {name} FAILED ({tc.get('time')} s) ====\n{text.rstrip()}")
with open(os.path.join(out, "failures.txt"), "w") as f:
    f.write("\n\n".join(report) + "\n")
for r in report:
    print(r + "\n")
print(f"==== per-test failures over {runs} run(s) ====")
if not fails:
    print(f"none: every one of {len(seen)} tests passed in every run")
else:
    w = max(len(n) for n in fails)
    for name, n in sorted(fails.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{name:<{w}}  {n}/{seen.get(name, runs)}")
print(f"(logs: {out})")
sys.exit(1 if fails else 0)
EOF
