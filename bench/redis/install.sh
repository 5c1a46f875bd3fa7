#!/usr/bin/env bash
# Installs the cache peer of bench/compare: Debian's redis-server and redis-benchmark
# (packages redis-server, redis-tools), once; a second run only checks they are there.
# bench/compare starts its own redis-server on loopback for each run (no persistence) and
# never uses the system service the package may start.
set -euo pipefail
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
    exit 0
fi
echo "installing redis-server and redis-tools (apt) ..." >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    redis-server redis-tools >/dev/null
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null
