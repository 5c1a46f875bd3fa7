#!/usr/bin/env bash
# Everything `make test` runs for the Go client (clients/go), in one script:
#   1. tools: the module's dependencies and staticcheck from the Go module proxy, installed
#      once into a cache by version (a second run finds them and goes on in seconds);
#   2. the broker and the `starling` CLI, built with cargo (CARGO_TARGET_DIR, else target/; the
#      profile $STARLING_CARGO_PROFILE, else ci, the profile of `make test`'s other phases),
#      for the integration and cross-client tests;
#   3. gofmt (check only), go vet (and of bench/nats/load, which builds on this module), staticcheck;
#   4. go test -race: unit tests, the conformance vectors (proto/vectors/frames.json), the fuzz
#      target's seeds, and the integration, cluster and cross-client tests against the real
#      broker (STARLING_BROKER_BIN, STARLING_CLI_BIN);
#   5. the vectors drift check: proto/vectors/frames.json must be what the proto crate generates.
# Usage: clients/go/test.sh        (exits non-zero on the first failure)
set -euo pipefail

STATICCHECK_VERSION=v0.8.2

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$repo/target}
tools=${STARLING_GO_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/starling/go-tools}

# Each step says how long the run has taken so far (SECONDS), so a slow phase shows in the log.
step() { echo "==> clients/go [${SECONDS}s]: $*" >&2; }

command -v go >/dev/null || { echo "clients/go/test.sh: go is not installed (Go >= 1.26 is needed)" >&2; exit 1; }

step "tools (module proxy, cached in $tools)"
mkdir -p "$tools/bin"
(cd "$here" && go mod download)
staticcheck=$tools/bin/staticcheck-$STATICCHECK_VERSION
if [[ ! -x $staticcheck ]]; then
    GOBIN="$tools/bin/tmp" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
    mv "$tools/bin/tmp/staticcheck" "$staticcheck"
    rmdir "$tools/bin/tmp"
fi

# The cargo profile: $STARLING_CARGO_PROFILE, else ci (what `make test` sets, so the unit
# phase's build is reused). cargo writes the dev profile to debug/, every other one to its name.
profile=${STARLING_CARGO_PROFILE:-ci}
profile_dir=$([[ $profile == dev ]] && echo debug || echo "$profile")
step "building starling-broker and the starling CLI (cargo --profile $profile, $target)"
(cd "$repo" && CARGO_TARGET_DIR=$target "$cargo" build -q --profile "$profile" -p starling-broker -p starling-cli)
broker=$target/$profile_dir/starling-broker
cli=$target/$profile_dir/starling

cd "$here"
step "gofmt"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
    echo "gofmt would change:" >&2
    echo "$unformatted" >&2
    exit 1
fi

step "go vet"
go vet ./...
# The bench's load program (bench/nats/load) uses this module through a replace directive: a
# dependency added here must reach its go.mod and go.sum too, or bench/compare cannot build it.
(cd "$repo/bench/nats/load" && go vet ./...)

step "staticcheck $STATICCHECK_VERSION"
"$staticcheck" ./...

step "go test -race (with the broker and CLI)"
STARLING_BROKER_BIN=$broker STARLING_CLI_BIN=$cli go test -race -count=1 ./...

step "vectors drift check"
(cd "$repo" && CARGO_TARGET_DIR=$target "$cargo" test -q --profile "$profile" -p starling-proto --test vectors_json)
step "all passed"
