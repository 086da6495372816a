#!/bin/sh
# Helper for the .vtc scripts (varnishtest has no include): writes rondel's config and waits
# until rondel listens.
#   rondel_ctl.sh config TMPDIR PORT BACKEND_ADDR...   writes TMPDIR/rondel.yaml (one pool "p",
#                                                     retries 0, error log TMPDIR/rondel.err);
#                                                     extra pool keys may come on stdin
#   rondel_ctl.sh ready TMPDIR                         waits (<= 10 s) for "listening name=web"
#   rondel_ctl.sh log TMPDIR PATTERN                   fails unless the error log matches PATTERN
set -eu
cmd=$1 dir=$2
case $cmd in
config)
  port=$3
  shift 3
  extra=""
  [ -t 0 ] || extra=$(cat)
  {
    echo "listeners:"
    echo "  - { name: web, bind: \"127.0.0.1:$port\", pool: p, header_timeout: 3s }"
    echo "pools:"
    echo "  - name: p"
    echo "    retries: 0"
    [ -z "$extra" ] || echo "$extra"
    echo "    backends:"
    for b in "$@"; do echo "      - { address: \"$b\" }"; done
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
log)
  grep -q -e "$3" "$dir/rondel.err" || { cat "$dir/rondel.err"; echo "no log line matches '$3'"; exit 1; }
  ;;
*)
  echo "unknown command $cmd" >&2
  exit 2
  ;;
esac
