#!/usr/bin/env bash
# Builds the peer for bench/compare into a cache directory:
#   - nats-server at a pinned version, with `go install` from the Go module proxy;
#   - nats-load, our Go load program (bench/nats/load, pinned by its go.sum),
#     which also drives the NSQ peer (nsqd, built by bench/nsq/build.sh).
# Usage: bench/nats/build.sh [CACHE_DIR]   (default: target/bench-cache)
# Prints the bin directory on its last line. Rebuilds only what is missing.
set -euo pipefail

NATS_SERVER_VERSION=v2.15.2

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-$repo/target/bench-cache}
bin=$cache/bin
mkdir -p "$bin"

command -v go >/dev/null || { echo "bench/nats/build.sh: go is not installed" >&2; exit 1; }

stamp=$bin/.nats-server-$NATS_SERVER_VERSION
if [[ ! -x $bin/nats-server || ! -e $stamp ]]; then
    echo "building nats-server $NATS_SERVER_VERSION (go install) ..." >&2
    GOBIN=$bin nice go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
    touch "$stamp"
fi

# Rebuild the load program when any of its sources is newer than the binary.
# Its starling transport builds the Go client (clients/go) from this repository too.
if [[ ! -x $bin/nats-load ]] || [[ -n $(find "$here/load" "$repo/clients/go" -newer "$bin/nats-load" -type f) ]]; then
    echo "building nats-load ..." >&2
    (cd "$here/load" && nice go build -o "$bin/nats-load" .)
fi
echo "$bin"
