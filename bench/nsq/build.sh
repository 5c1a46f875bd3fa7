#!/usr/bin/env bash
# Builds nsqd, the NSQ peer of bench/compare, into the same cache directory as
# bench/nats/build.sh (which builds the load program that drives both peers).
# nsqd comes from the Go module proxy at the version pinned by bench/nsq/go.mod
# and go.sum (`go install github.com/nsqio/nsq/apps/nsqd@VERSION` does not work:
# nsqd's go.mod has a replace directive, which `go install …@version` refuses).
# Usage: bench/nsq/build.sh [CACHE_DIR]   (default: target/bench-cache)
# Prints the bin directory on its last line. Rebuilds only when the pin changes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-$repo/target/bench-cache}
bin=$cache/bin
mkdir -p "$bin"

command -v go >/dev/null || { echo "bench/nsq/build.sh: go is not installed" >&2; exit 1; }
# The version is go.mod's: one place pins it.
NSQ_VERSION=$(awk '$1 == "github.com/nsqio/nsq" {print $2}' "$here/go.mod")
[[ -n $NSQ_VERSION ]] || { echo "bench/nsq/build.sh: bench/nsq/go.mod does not require github.com/nsqio/nsq" >&2; exit 1; }

stamp=$bin/.nsqd-$NSQ_VERSION
if [[ ! -x $bin/nsqd || ! -e $stamp ]] || [[ $here/go.sum -nt $stamp || $here/go.mod -nt $stamp ]]; then
    echo "building nsqd $NSQ_VERSION (go build from the module proxy) ..." >&2
    (cd "$here" && nice go build -o "$bin/nsqd" github.com/nsqio/nsq/apps/nsqd)
    touch "$stamp"
fi
echo "$bin"
