#!/bin/sh
# Builds the libFuzzer targets with clang and fuzzes each for a bounded time.
#   tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]      (default 60 s, every target)
# Environment: BUILD_DIR (default build-fuzz under the repo), CC/CXX (default clang-14),
# JOBS (build parallelism, default 2). New interesting inputs go to BUILD_DIR/corpus/<target>
# (seeded from the checked-in corpus, which is never written); crashes to BUILD_DIR/crashes/.
# Exit status is non-zero if any target found a crash: copy the input into
# tests/fuzz/corpus/<target>/ once fixed, so the replay test guards it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
build=${BUILD_DIR:-$repo/build-fuzz}
targets=${*:-request_parser chunked_body response_parser config bounded_pick proxy_protocol h2_session llm_key}

CC=${CC:-clang-14} CXX=${CXX:-clang++-14} cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
for t in $targets; do
  cmake --build "$build" --target "fuzz_$t" -j "${JOBS:-2}"
done

status=0
for t in $targets; do
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  echo "== fuzz_$t for ${secs}s"
  if ! "$build/fuzz_$t" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" \
      "$build/corpus/$t" "$here/corpus/$t" 2>"$build/fuzz_$t.log"; then
    status=1
    echo "   CRASH: see $build/fuzz_$t.log and $build/crashes/$t/"
  fi
  grep -E '^stat::number_of_executed_units|^stat::new_units_added|^stat::peak_rss_mb' \
    "$build/fuzz_$t.log" | sed 's/^/   /'
done
exit $status
