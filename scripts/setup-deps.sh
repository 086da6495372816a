#!/usr/bin/env bash
# Installs rondel's build and test dependencies from Debian packages. Idempotent: a package that
# is already installed is skipped, and apt is not touched at all when nothing is missing.
# Usage: scripts/setup-deps.sh [build|test|bench]   (default: test, which includes build)
set -euo pipefail

build_pkgs=(g++ make cmake ninja-build pkg-config libuv1-dev node-llhttp libyaml-cpp-dev libxxhash-dev
            prometheus-cpp-dev doctest-dev libbenchmark-dev libc-ares-dev
            libssl-dev libnghttp2-dev libsystemd-dev
            libboost-json1.81-dev  # the one JSON library: admin bodies, state file, ORCA, discovery, request bodies
            python3)  # CMake's find_package(Python3): a bare Debian image (Dockerfile) lacks it
test_pkgs=(curl wrk python3 procps xxhash varnish dnsmasq-base prometheus chromium slowhttptest
           stress-ng openssl nghttp2-client testssl.sh clang
           python3-yaml logrotate  # test_deploy_files: the k8s manifests parse, logrotate -d
           etcd-server etcd-client  # etcd discovery and fleet tests run a real etcd on loopback
           python3-hyperframe python3-hpack  # raw HTTP/2 frames for the h2spec-style battery
           strace)  # test_http2 counts rondel's epoll_ctl calls per response
bench_pkgs=(haproxy nginx-light wrk util-linux)

want=("${build_pkgs[@]}")
case "${1:-test}" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "usage: $0 [build|test|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Debian's haproxy and nginx packages start system services on install; rondel's benchmark runs
# them by hand on high ports, so keep the services from starting (policy-rc.d exit 101).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  made_policy=1
fi
trap '[ $made_policy -eq 1 ] && $sudo rm -f "$policy"' EXIT
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
