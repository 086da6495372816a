#!/bin/sh
# Inference-routing benchmark: kvsim's simulated inference servers behind each routing policy,
# same trace, same seed, in one run. See docs/benchmarks.md, "Inference routing".
#
#   tools/bench/llm.sh [--trace shared|qa|mooncake] [--rates 2,4,6,8,10] [--rate73 6]
#                      [--duration 240] [--speedup 10] [--servers 8] [--seed 1]
#                      [--policies round_robin,least_in_flight,random,haproxy_json,oracle,rondel_llm_1,rondel_llm_4,
#                                  rondel_llm_4_fleet,rondel_llm_hashed_1,rondel_llm_hashed_4,rondel_llm_orca,rondel_llm_prompt]
#                      [--svg docs/img/llm_ttft_p90.svg] [--out FILE] [--no-driver-check]
#                      [--requests-out PREFIX]
#
# Needs HAProxy 2.6 or later (`balance hash`; tools/bench/run.sh installs it) and builds rondel
# and kvsim in build-bench/ if needed (BUILD_DIR to use another build tree).
# Everything listens on 127.0.0.1 and is stopped by pid at the end. Results go to
# tools/bench/results/llm-*.json.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}

HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
if [ ! -x "$HAPROXY" ]; then
  echo "llm.sh: needs haproxy 2.6 or later (tools/bench/run.sh installs it)" >&2
  exit 1
fi

if [ ! -x "$BUILD/src/server/rondel" ] || [ ! -x "$BUILD/tools/kvsim/kvsim" ]; then
  echo "llm.sh: building rondel and kvsim in $BUILD" >&2
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$BUILD" --target rondel kvsim -j2 >&2
fi

exec python3 "$ROOT/tools/bench/llm_bench.py" --build-dir "$BUILD" --haproxy "$HAPROXY" \
  --command "tools/bench/llm.sh $*" "$@"
