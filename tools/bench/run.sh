#!/bin/sh
# Side-by-side benchmark of rondel, HAProxy and nginx (and no proxy). See docs/benchmarks.md.
#
#   tools/bench/run.sh [--duration 10] [--reps 3] [--backends 4] [--conns 50] [--paths 10000]
#                      [--zipf 1.1] [--backend auto|test|test-each|nginx] [--profile] [--quick] [--no-dist]
#                      [--idle 10000] [--idle-only] [--profile-only] [--nice N]
#                      [--workers-pass] [--workers-only] [--batch-pass]
#                      [--latency-pass] [--latency-only] [--latency-conns 100] [--latency-delay-ms 1]
#                      [--bodies-pass] [--bodies-only] [--bodies-baseline RONDEL] [--bodies-workloads KEYS]
#                      [--tls-pass] [--tls-only] [--tls-idle 1000]
#                      [--h2-pass] [--h2-only]
#
# Installs haproxy, nginx-light, wrk, nghttp2-client (h2load), util-linux (taskset) and linux-perf on Debian when they are
# missing (with a policy-rc.d that keeps the packages from starting services), builds rondel in
# build-bench/ if needed, then runs tools/bench/bench.py. Needs 2+ cores: proxies are pinned to
# core 0, wrk and the backends to core 1 (except in the workers pass, rondel workers 1 vs 2 and
# HAProxy nbthread 1 vs 2, where nothing is pinned). Results go to tools/bench/results/.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}

need=""
command -v haproxy >/dev/null 2>&1 || need="$need haproxy"
command -v nginx >/dev/null 2>&1 || need="$need nginx-light"
command -v wrk >/dev/null 2>&1 || need="$need wrk"
command -v h2load >/dev/null 2>&1 || need="$need nghttp2-client"
command -v taskset >/dev/null 2>&1 || need="$need util-linux"
command -v perf >/dev/null 2>&1 || need="$need linux-perf"
if [ -n "$need" ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: please install:$need" >&2
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  created_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    # Keep Debian's maintainer scripts from starting haproxy/nginx as services.
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  echo "run.sh: installing$need" >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need >&2 || {
    [ -z "$created_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
    exit 1
  }
  [ -z "$created_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
fi

if [ ! -x "$BUILD/src/server/rondel" ] || [ ! -x "$BUILD/tools/test_backend/rondel-test-backend" ]; then
  echo "run.sh: building rondel in $BUILD" >&2
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$BUILD" --target rondel rondel-test-backend -j2 >&2
fi

if [ "$(nproc)" -lt 2 ]; then
  echo "run.sh: needs at least 2 CPUs (proxy on core 0, client and backends on core 1)" >&2
  exit 1
fi

exec python3 "$ROOT/tools/bench/bench.py" --build-dir "$BUILD" --command "tools/bench/run.sh $*" "$@"
