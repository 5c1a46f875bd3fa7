#!/usr/bin/env bash
# The one cargo build of `make test`: every library, binary, test and example of the workspace
# (the e2e suite's test binary included), in the profile $STARLING_CARGO_PROFILE (default ci),
# in ONE cargo invocation. The unit phase, bench-smoke, the e2e images, the CLI and bench the
# e2e tests drive and the e2e test binary all use what it builds; a second call finds every
# unit fresh and returns in about a second.
#
# Why one invocation: cargo unifies the features of a dependency over the packages and targets
# one invocation selects. `-p starling-broker` alone, `-p starling-e2e` alone and
# `--workspace` with the tests each give tokio, kube and a few others different feature sets
# (the tests' `tokio/test-util` and `kube/cel`), and a dependency with other features is a
# different compiled unit, with every crate above it, workspace crates included: the same
# commit's workspace was compiled three to five times per `make test` (docs/local-cluster.md,
# "Test budget"). Whoever wants these artifacts calls this script, or selects `--workspace`
# with test targets (e.g. `cargo test --workspace --test suite`, `cargo test --workspace
# --doc`), never `-p X` alone.
#
#   scripts/cargo-build.sh                 build (cargo's usual output on stderr)
#   scripts/cargo-build.sh --json FILE     also write cargo's JSON messages (one per line) to
#                                          FILE, e.g. to list the test executables
#   scripts/cargo-build.sh -q              cargo's --quiet
#
# `cargo build --lib --bins --tests --examples` rather than `cargo test --no-run`: the
# binaries (broker, operator, CLI, bench) are named targets here, not built only because their
# packages happen to have integration tests. Not `--benches` and not `--all-targets`: those
# compile every library once more in bench mode.
set -uo pipefail
cd "$(dirname "$0")/.."

cargo=${CARGO:-cargo}
profile=${STARLING_CARGO_PROFILE:-ci}
json=""
quiet=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json=${2:?--json needs a file}; shift 2 ;;
    -q|--quiet) quiet=(-q); shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "cargo-build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

build=("$cargo" build "${quiet[@]}" --profile "$profile" --workspace --lib --bins --tests --examples)
echo "== ${build[*]}" >&2
if [[ -n "$json" ]]; then
  "${build[@]}" --message-format=json-render-diagnostics >"$json"
else
  "${build[@]}"
fi
