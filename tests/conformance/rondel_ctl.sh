#!/bin/sh
# Helper for the .vtc scripts (varnishtest has no include): writes rondel's config and waits
# until rondel listens.
#   rondel_ctl.sh config TMPDIR PORT BACKEND...   writes TMPDIR/rondel.yaml (one pool "p",
#                                                retries 0, error log TMPDIR/rondel.err); a
#                                                BACKEND is HOST:PORT, or @FILE: the address
#                                                rondel-test-backend printed to FILE (waited for)
#   rondel_ctl.sh ready TMPDIR                    waits (<= 10 s) for "listening name=web"
#   rondel_ctl.sh log TMPDIR PATTERN              fails unless the error log matches PATTERN
#   rondel_ctl.sh nolog TMPDIR PATTERN FILE       fails if TMPDIR/FILE matches PATTERN
set -eu
cmd=$1 dir=$2
case $cmd in
config)
  port=$3
  shift 3
  {
    echo "listeners:"
    echo "  - { name: web, bind: \"127.0.0.1:$port\", pool: p, header_timeout: 3s }"
    echo "pools:"
    echo "  - name: p"
    echo "    retries: 0"
    echo "    backends:"
    for b in "$@"; do
      case $b in
      @*)
        f=${b#@} i=0
        until grep -q '^listening ' "$f" 2>/dev/null; do
          i=$((i + 1)); [ $i -lt 200 ] || { echo "backend did not start" >&2; exit 1; }; sleep 0.05
        done
        b=$(sed -n 's/^listening //p' "$f" | head -1)
        ;;
      esac
      echo "      - { address: \"$b\" }"
    done
    echo "log: { access_log: \"$dir/rondel.access\", error_log: \"$dir/rondel.err\", level: debug }"
  } >"$dir/rondel.yaml"
  ;;
ready)
  i=0
  until grep -q "listening name=web" "$dir/rondel.err" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -ge 200 ]; then cat "$dir/rondel.err" 2>/dev/null; echo "rondel did not start"; exit 1; fi
    sleep 0.05
  done
  ;;
nolog)
  ! grep -q -e "$3" "$dir/$4" 2>/dev/null || { cat "$dir/$4"; echo "'$3' found in $4"; exit 1; }
  ;;
log)
  grep -q -e "$3" "$dir/rondel.err" || { cat "$dir/rondel.err"; echo "no log line matches '$3'"; exit 1; }
  ;;
*)
  echo "unknown command $cmd" >&2
  exit 2
  ;;
esac
