#!/usr/bin/env bash
# The fresh-machine check: runs `make test` on a clean clone of the committed HEAD the way a
# machine that has never run anything would, and times each phase.
#
#   scripts/fresh-check.sh            check HEAD
#   scripts/fresh-check.sh REV        check another commit
#
# What "fresh" means here:
#   - HOME is a new empty directory, so ~/.cache/starling (helm, Kubernetes, images), the cargo
#     registry (~/.cargo) and the Go module and build caches are all empty;
#   - the clone is new, so cargo's target/ is empty too;
#   - PATH holds only the system directories plus the Rust (rustup proxies) and Go toolchains;
#     RUSTUP_HOME points at the installed toolchains, nothing else is inherited;
#   - no KUBECONFIG, no STARLING_* settings.
# Debian packages are system-wide, so one that is already installed stays installed; the install
# script's own check decides (it installs what is missing with apt).
#
# Run it before changing any install step (e2e/cluster/install.sh, the Makefile's phases, a new
# tool a test uses). It takes about an hour on 2 cores, so CI does not run it. It needs root and
# the machine's local cluster slot (/var/tmp/starling-e2e): stop a running cluster first with
# e2e/cluster/down.sh. STARLING_FRESH_KEEP=1 keeps the temporary HOME and clone for a look.
# The phase timings are printed at the end and kept in /var/tmp/starling-fresh-<commit>.txt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=$(git -C "$repo" rev-parse --verify "${1:-HEAD}^{commit}")

[[ $(id -u) -eq 0 ]] || { echo "fresh-check: must run as root (the e2e cluster needs it)" >&2; exit 2; }
state=${STARLING_E2E_DIR:-/var/tmp/starling-e2e}
if compgen -G "$state/pids/*.pid" >/dev/null; then
  for f in "$state"/pids/*.pid; do
    if kill -0 "$(cat "$f")" 2>/dev/null; then
      echo "fresh-check: a local cluster is running ($f); stop it with e2e/cluster/down.sh" >&2
      exit 2
    fi
  done
fi

cargo_bin=$(dirname "$(command -v cargo)")
go_bin=$(dirname "$(command -v go)")
rustup_home=$(rustup show home 2>/dev/null || echo "${RUSTUP_HOME:-/root/.rustup}")
sys_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Only the toolchain directories themselves, not whatever else shares a directory with them.
work=$(mktemp -d /var/tmp/starling-fresh.XXXXXX)
mkdir -p "$work/home" "$work/toolchains"
ln -s "$cargo_bin/cargo" "$cargo_bin/rustc" "$cargo_bin/rustup" "$work/toolchains/"
for t in rustfmt cargo-fmt cargo-clippy clippy-driver rustdoc; do
  [[ -e "$cargo_bin/$t" ]] && ln -s "$cargo_bin/$t" "$work/toolchains/"
done
ln -s "$go_bin/go" "$go_bin/gofmt" "$work/toolchains/"

cleanup() {
  local rc=$?
  if [[ "${STARLING_FRESH_KEEP:-0}" == 1 ]]; then
    echo "fresh-check: kept $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT

git clone -q --no-local "$repo" "$work/starling"
git -C "$work/starling" checkout -q "$rev"

fresh_env=(env -i HOME="$work/home" PATH="$work/toolchains:$sys_path" RUSTUP_HOME="$rustup_home"
  LANG=C.UTF-8 TERM=dumb USER=root TMPDIR=/tmp DEBIAN_FRONTEND=noninteractive)
timings="/var/tmp/starling-fresh-${rev:0:12}.txt"
{
  echo "fresh-check of $rev on $(hostname), $(nproc) cores, started $(date -u +%FT%TZ)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$timings"

# `make test` exactly as CI runs it (scripts/test.sh times each phase and appends the table to
# $STARLING_TIMINGS_FILE). The empty HOME makes its cargo build directory and tool cache empty.
rc=0
(cd "$work/starling" && "${fresh_env[@]}" STARLING_TIMINGS_FILE="$timings" make test) || rc=$?
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$timings"
exit "$rc"
