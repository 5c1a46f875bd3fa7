#!/usr/bin/env bash
# cargo, with the package selection of scripts/cargo-build.sh (the one cargo build of `make
# test`), for scripts that select packages themselves: `make go-client` gives it to
# clients/go/test.sh as $CARGO.
#
# In `cargo build` and `cargo test`, every `-p PKG` / `--package PKG` becomes `--workspace`,
# and `cargo build` builds the targets scripts/cargo-build.sh builds. cargo unifies a
# dependency's features over what one invocation selects, so `build -p starling-broker -p
# starling-cli` alone compiles tokio and everything above it (the workspace's crates
# included) once more without the tests' `tokio/test-util`; selected like the suite's build,
# it finds every unit fresh. A target filter (`--test vectors_json`) still runs just that
# target. Any other command goes to cargo unchanged.
#
#   CARGO=scripts/cargo-unified.sh clients/go/test.sh
set -euo pipefail

cargo=${STARLING_REAL_CARGO:-cargo}
[[ $# -gt 0 ]] || exec "$cargo"
sub=$1
shift
case "$sub" in
  build|test) ;;
  *) exec "$cargo" "$sub" "$@" ;;
esac

args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p|--package) shift 2 ;;
    -p*|--package=*) shift ;;
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ "$sub" == build ]]; then
  exec "$cargo" build --workspace --lib --bins --tests --examples "${args[@]}"
fi
exec "$cargo" test --workspace "${args[@]}"
