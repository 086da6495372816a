#!/bin/sh
# Runs one varnishtest script against rondel: picks a free loopback port for rondel's listener
# and passes the binaries and the port in as macros.
#   run_vtc.sh RONDEL TEST_BACKEND FILE.vtc [varnishtest options...]
# Exit status is varnishtest's. A vtc whose rondel could not bind its port (another process took
# it between the probe and the bind) is retried with a new port, at most twice.
set -u
rondel=$1 backend=$2 vtc=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
command -v varnishtest >/dev/null || { echo "varnishtest not installed (apt-get install varnish)"; exit 1; }

free_port() {
  # Binding port 0 lets the kernel choose; the port stays free until rondel binds it (a small
  # race, handled by the retry below).
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + $$ % 20000))
}

attempt=0
while :; do
  port=$(free_port)
  out=$(mktemp)
  varnishtest -t 60 -v -D rondel="$rondel" -D backend="$backend" -D rondel_port="$port" -D ctl="$here/rondel_ctl.sh" "$@" "$vtc" >"$out" 2>&1
  rc=$?
  attempt=$((attempt + 1))
  if [ $rc -ne 0 ] && [ $attempt -lt 3 ] && grep -qi 'address already in use\|EADDRINUSE' "$out"; then
    rm -f "$out"
    continue
  fi
  if [ $rc -ne 0 ]; then cat "$out"; else grep -E '^#     top  TEST .* passed|^#' "$out" | tail -1; fi
  rm -f "$out"
  exit $rc
done
