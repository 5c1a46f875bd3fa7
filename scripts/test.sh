#!/usr/bin/env bash
# `make test`: runs the suite's phases in order, times each, and prints the table at the end
# (so every CI log shows where the time went). `.ci/run` calls `make test`, which calls this.
#
#   scripts/test.sh                 every phase of `make test-phases`
#   scripts/test.sh unit lint       only these phases, in this order
#
# What it adds to running the phases one by one:
#   - `deps` (Debian packages, and Kubernetes, etcd, CoreDNS, helm built from the Go module
#     proxy: about 14 minutes the first time on a machine, a second when cached) starts in the
#     background at once, at the phases' own priority, and is waited for before the first phase
#     that needs its tools. From nothing its downloads and single-threaded Go links fill the
#     gaps of the cargo build.
#     Its output goes to $STARLING_CACHE_DIR/logs/deps.log and is printed if it fails.
#   - the cargo build directory (intermediate artifacts) lives in
#     $STARLING_CACHE_DIR/cargo-build/<hash of the checkout's path> unless CARGO_BUILD_BUILD_DIR
#     is set, so a clean clone at a path that ran the suite before (a CI checkout) does not
#     recompile the ~390 dependencies (docs/local-cluster.md, "Test budget"). One directory
#     per path, because cargo names a workspace crate's artifacts by its path relative to the
#     workspace: two checkouts sharing one directory could each take the other's compiled
#     crates for fresh. Binaries still go to the clone's target/. A path's first run copies
#     the most recently used directory minus the workspace's crates, so a clone at a new path
#     compiles only those; past $STARLING_BUILD_CACHE_MAX_GB (default 30) the least recently
#     used checkout directories are removed, never the newest (scripts/build-cache.sh).
#   - in that per-path directory, a clean clone's files whose content the last run built get
#     that run's modification times back (scripts/source-mtimes.py), and the broker's build
#     script is told the revision (STARLING_GIT_REVISION): a clone stamps every file new,
#     which made cargo recompile every workspace crate on every CI run.
#   - with STARLING_E2E_OVERLAP=1 (default 0), `e2e` (most of it waiting for pods and the
#     operator) starts in the background as soon as the phases it must follow (fmt-check, lint,
#     build) are done and `deps` is ready, and the phases after `build` (unit, go-client,
#     bench-smoke, the checks) run beside it; its output is printed where the phase stands in
#     the list. Off by default: beside the e2e setup, broker/tests/cluster's
#     scale::a_drain_right_after_a_restart_hands_off_every_key lost a cache key once
#     (2026-12-03), a race not understood yet. A phase that fails stops the ones after it,
#     but a running e2e is waited for (and its cluster torn down) before the table is printed.
#   - a timing table (date, commit, each phase's wall time, its CPU time (user+sys of the
#     phase's processes, which other builds on the machine do not stretch) and the load average
#     at its end, `uptime` at the end), appended to $STARLING_TIMINGS_FILE when that is set, else to
#     $STARLING_CACHE_DIR/logs/test-timings.log, so every run leaves a record on the machine.
set -uo pipefail
cd "$(dirname "$0")/.."

CACHE_DIR=${STARLING_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/starling}
mkdir -p "$CACHE_DIR/logs"

if [[ -z "${CARGO_BUILD_BUILD_DIR:-}" ]]; then
  build_cache="$CACHE_DIR/cargo-build"
  # {workspace-path-hash} is expanded by cargo (build.build-dir templates, cargo >= 1.91).
  export CARGO_BUILD_BUILD_DIR="$build_cache/{workspace-path-hash}"
  # A path's first run starts from the build directory used most recently, minus the
  # workspace's own crates (scripts/build-cache.sh); past the size cap the directories used
  # least recently go first, never the newest, so the checkout that runs most (CI's) stays warm.
  ./scripts/build-cache.sh "$build_cache"
  # A clean clone stamps every file with the clone's time, which makes cargo recompile every
  # workspace crate; files whose content the last run here built get that run's times back
  # (scripts/source-mtimes.py, which says why that is safe). Sealed when the run ends.
  own_build_dir=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("build_directory") or "")' 2>/dev/null)
  if [[ -n "$own_build_dir" && "$own_build_dir" == "$build_cache"/* ]]; then
    ./scripts/source-mtimes.py rewind "$own_build_dir" || own_build_dir=""
  else
    own_build_dir=""
  fi
fi
# The revision the broker reports (broker/build.rs), computed here as the build script would:
# told by the environment, the build script watches no file of .git, whose every file a clean
# clone stamps new, and which made cargo recompile the broker and every crate above it even
# for a commit built before.
if [[ -z "${STARLING_GIT_REVISION:-}" ]] && rev=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  [[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || rev="$rev-dirty"
  export STARLING_GIT_REVISION=$rev
fi
# Incremental compilation only pays for repeated edits of one checkout; a suite run compiles
# each crate once, and the incremental caches of every clone would pile up in the build dir.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

if [[ $# -gt 0 ]]; then
  phases=("$@")
else
  read -r -a phases <<<"$(make -s test-phases)"
fi

# Phases that run a tool `deps` installs; every phase before the first of these can overlap it.
needs_deps() {
  case "$1" in
    deps|promtool-check|manifests-check|e2e|chart-test) return 0 ;;
    *) return 1 ;;
  esac
}

# cpu_seconds FILE: what the `times` a subshell wrote to FILE says its children used (user+sys,
# of every process they waited for): the phase's cost apart from the other builds on the
# machine, which stretch the wall time but not this.
cpu_seconds() {
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1" 2>/dev/null
}
cpu_file=$(mktemp)
trap 'rm -f "$cpu_file" "$cpu_file.deps" "$cpu_file.e2e"; [[ -z "${own_build_dir:-}" ]] || ./scripts/source-mtimes.py seal "$own_build_dir"' EXIT

deps_pid=""
deps_log="$CACHE_DIR/logs/deps.log"
deps_t0=0
for p in "${phases[@]}"; do
  if [[ "$p" == deps ]]; then
    deps_t0=$SECONDS
    echo "== make deps (in the background: $deps_log)" >&2
    # Not niced: from nothing, the e2e phase waits for it, and niced it got only what the
    # cargo build and the other builds on the machine left (5765 s at a126717, 4028 s waited).
    (STARLING_GO_NICE=0 make deps; rc=$?; times >"$cpu_file.deps"; exit "$rc") >"$deps_log" 2>&1 &
    deps_pid=$!
    break
  fi
done

declare -a rows=()
# row PHASE WALL CPU RESULT
row() { rows+=("$(printf '%-16s %6ds %6s CPU s  %-22s load %s' "$1" "$2" "${3:-?}" "$4" "$(cut -d' ' -f1-3 /proc/loadavg)")"); }

wait_deps() {
  [[ -n "$deps_pid" ]] || return 0
  local t0=$SECONDS rc=0
  echo "== waiting for make deps" >&2
  wait "$deps_pid" || rc=$?
  deps_pid=""
  if [[ $rc -ne 0 ]]; then
    cat "$deps_log" >&2
    row deps $((SECONDS - deps_t0)) "$(cpu_seconds "$cpu_file.deps")" "FAILED (exit $rc)"
    return "$rc"
  fi
  tail -n 3 "$deps_log" >&2
  row deps $((SECONDS - deps_t0)) "$(cpu_seconds "$cpu_file.deps")" "ok (waited $((SECONDS - t0))s)"
}

# The background e2e phase: started by start_e2e, collected by wait_e2e.
e2e_pid="" e2e_t0=0 e2e_log=""
overlap=${STARLING_E2E_OVERLAP:-0}
e2e_listed=0
for p in "${phases[@]}"; do [[ "$p" == e2e ]] && e2e_listed=1; done
# must_precede_e2e PHASE: the phases e2e needs finished first (it packs the build's binaries
# into images; lint and fmt-check fail fast on a broken tree).
must_precede_e2e() {
  case "$1" in
    fmt-check|lint|build) return 0 ;;
    *) return 1 ;;
  esac
}
start_e2e() {
  e2e_t0=$SECONDS
  e2e_log=$(mktemp)
  echo "== make e2e (in the background beside the next phases; its output follows at its place)" >&2
  (make --no-print-directory e2e; r=$?; times >"$cpu_file.e2e"; exit "$r") >"$e2e_log" 2>&1 &
  e2e_pid=$!
}
# wait_e2e: the background e2e's output and its row; its exit status.
wait_e2e() {
  local r=0
  wait "$e2e_pid" || r=$?
  e2e_pid=""
  echo "== make e2e (started in the background $((SECONDS - e2e_t0))s ago)" >&2
  cat "$e2e_log" >&2
  rm -f "$e2e_log"
  if [[ $r -eq 0 ]]; then
    row e2e $((SECONDS - e2e_t0)) "$(cpu_seconds "$cpu_file.e2e")" "ok (beside the others)"
  else
    row e2e $((SECONDS - e2e_t0)) "$(cpu_seconds "$cpu_file.e2e")" "FAILED (exit $r)"
  fi
  return "$r"
}

start=$SECONDS
rc=0
e2e_started=0
for p in "${phases[@]}"; do
  if [[ "$p" == e2e && -n "$e2e_pid" ]]; then
    wait_e2e || { rc=$?; break; }
    continue
  fi
  if [[ "$overlap" == 1 && $e2e_listed == 1 && $e2e_started == 0 ]] && ! must_precede_e2e "$p"; then
    wait_deps || { rc=$?; break; }
    e2e_started=1
    start_e2e
    if [[ "$p" == e2e ]]; then
      wait_e2e || { rc=$?; break; }
      continue
    fi
    [[ "$p" == deps ]] && continue
  fi
  if needs_deps "$p"; then
    wait_deps || { rc=$?; break; }
    [[ "$p" == deps ]] && continue
  fi
  t0=$SECONDS
  echo "== make $p" >&2
  if (make --no-print-directory "$p"; r=$?; times >"$cpu_file"; exit "$r"); then
    row "$p" $((SECONDS - t0)) "$(cpu_seconds "$cpu_file")" ok
  else
    rc=$?
    row "$p" $((SECONDS - t0)) "$(cpu_seconds "$cpu_file")" "FAILED (exit $rc)"
    break
  fi
done
if [[ -n "$e2e_pid" ]]; then
  # A phase beside it failed: let it finish (and tear its cluster down), and report it too.
  wait_e2e || true
fi
if [[ -n "$deps_pid" ]]; then
  # The subshell waits for make; stop make itself, as a Ctrl-C would.
  pkill -TERM -P "$deps_pid" 2>/dev/null
  kill "$deps_pid" 2>/dev/null
  wait "$deps_pid" 2>/dev/null
fi
total=$((SECONDS - start))

# This shell's children: every phase and `deps`.
times >"$cpu_file"
total_cpu=$(cpu_seconds "$cpu_file")
timings_file=${STARLING_TIMINGS_FILE:-$CACHE_DIR/logs/test-timings.log}
{
  echo
  echo "make test: phase times on $(hostname), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), profile ${STARLING_CARGO_PROFILE:-ci}, phases: ${phases[*]}"
  printf '%s\n' "${rows[@]}"
  printf '%-16s %6ds %6s CPU s  (%dm%02ds)%s\n' total "$total" "$total_cpu" \
    $((total / 60)) $((total % 60)) "$([[ $rc -eq 0 ]] && echo '' || echo ', stopped at the failure')"
  echo "uptime: $(uptime)"
} | tee -a "$timings_file"
exit "$rc"
