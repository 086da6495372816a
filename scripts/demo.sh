#!/usr/bin/env bash
# `make run`: four test backends on 127.0.0.1:9001-9004 and rondel in front of them with
# conf/rondel.yaml (listener 127.0.0.1:8080, admin 127.0.0.1:9901). Ctrl-C stops everything.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
backend="$build/tools/test_backend/rondel-test-backend"
rondel="$build/src/server/rondel"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for port in 9001 9002 9003 9004; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo: port $port is already in use; stop whatever listens there first" >&2
    exit 1
  fi
done
names=(cache-a cache-b cache-c cache-d)
i=0
for port in 9001 9002 9003 9004; do
  # Each backend models a cache of 3000 objects; a miss costs 2 ms extra (an origin fetch).
  "$backend" --listen "127.0.0.1:$port" --name "${names[$i]}" --cache-objects 3000 \
    --miss-delay-ms 2 >/dev/null &
  pids+=($!)
  i=$((i + 1))
done

"$rondel" -c -f "$root/conf/rondel.yaml" >/dev/null
cat <<'MSG'
rondel demo: 4 backends (cache-a..cache-d) on 127.0.0.1:9001-9004, rondel on 127.0.0.1:8080.
Try, in another terminal:
  curl -i http://127.0.0.1:8080/videos/42         # same path -> same backend (X-Backend)
  for i in $(seq 1 8); do curl -s -o /dev/null -w '%header{x-backend}\n' http://127.0.0.1:8080/obj/$i; done
  curl -s 'http://127.0.0.1:9901/api/route?pool=caches&key=/videos/42'   # why it went there
  curl -s http://127.0.0.1:9901/api/pools          # in-flight, capacity, key-space share
  curl -s http://127.0.0.1:9901/metrics | grep rondel_
  kill -HUP <rondel pid>                           # reload conf/rondel.yaml
Access log below; Ctrl-C stops the demo.
MSG
"$rondel" -f "$root/conf/rondel.yaml" &
pids+=($!)
wait "${pids[-1]}"
