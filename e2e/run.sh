#!/usr/bin/env bash
# `make e2e`: set up the local cluster with the operator (e2e/setup.sh), run the Rust e2e suite
# against it, $STARLING_E2E_THREADS tests at a time (default 4: each test has its own namespace,
# and most of a test's time is spent waiting for pods and the operator), each test in its own
# process, the longest first (by the last run's times), and tear the cluster down again; each
# test's output is kept in $CACHE_DIR/logs/e2e-tests/ (STARLING_E2E_KEEP=1 keeps the cluster for
# debugging; an existing cluster given with STARLING_USE_EXISTING_CLUSTER=1 is never torn down).
#
#   e2e/run.sh              every test
#   e2e/run.sh access       only the tests whose name contains `access` (cargo's test filter;
#                           several filters may be given)
source "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"
cd "$REPO_ROOT"

teardown() {
  local rc=$?
  # Every test's output outlives the cluster's state directory: $CACHE_DIR/logs/e2e-tests/.
  if [[ -d "${LOGS:-}" ]]; then
    rm -rf "$CACHE_DIR/logs/e2e-tests"
    cp -r "$LOGS" "$CACHE_DIR/logs/e2e-tests" 2>/dev/null || true
  fi
  if [[ -s "${STARLING_E2E_TIMINGS:-}" ]]; then
    log "e2e tests by time (seconds from namespace creation to the end of the test):"
    sort -k3 -nr "$STARLING_E2E_TIMINGS" | awk '{ printf "  %7.1f  %s\n", $3, $1 }'
  fi
  if [[ "${STARLING_USE_EXISTING_CLUSTER:-0}" != 1 && "${STARLING_E2E_KEEP:-0}" != 1 ]]; then
    "$E2E_CLUSTER_DIR/down.sh" || true
  fi
  exit "$rc"
}
trap teardown EXIT

# setup.sh builds the whole workspace with the e2e test binary in one cargo invocation
# (scripts/cargo-build.sh), with the same features as the rest of `make test`'s build; the
# binary is looked up below with `cargo test --workspace --test suite --no-run`: the same
# package selection, so cargo finds it fresh. `cargo test -p starling-e2e` would unify tokio's
# and kube's features without the other crates' tests and compile the workspace again
# (docs/local-cluster.md, "Test budget").
STARLING_E2E_BUILD=suite "$E2E_DIR/setup.sh"
# shellcheck disable=SC1091
source "$STATE_DIR/e2e.env"
# Each test's namespace appends its test's time here (e2e/src/kube_env.rs, TestNamespace's Drop).
export STARLING_E2E_TIMINGS="$STATE_DIR/test-times.log"
: > "$STARLING_E2E_TIMINGS"
# The access tests' NetworkPolicy probe runs busybox pods from the image up.sh imported.
export STARLING_E2E_BUSYBOX_IMAGE="$BUSYBOX_IMAGE"
# Tests that disturb what every other test shares (the operator's pod) run alone, after the
# others: the operator's restart would pause every other test's reconciliation.
EXCLUSIVE=(lifecycle::operator_restart_mid_rollout_converges_without_duplicates)
THREADS=${STARLING_E2E_THREADS:-4}
# Each test's time in the last run that ran it on this machine, to start the longest first;
# until this machine has run the suite, the times in e2e/test-times.txt (measured on the 2-core
# development machine; only their order matters).
HISTORY="$CACHE_DIR/logs/e2e-test-times.log"
mkdir -p "$(dirname "$HISTORY")"
[[ -s "$HISTORY" ]] || cp "$E2E_DIR/test-times.txt" "$HISTORY"

E2E=(cargo test --profile "${STARLING_CARGO_PROFILE:-release}" --workspace --test suite)
EXE=$("${E2E[@]}" --no-run --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "suite" and m.get("executable"):
        print(m["executable"])')
[[ -x "$EXE" ]] || die "the e2e test binary was not built"

# Every test of the suite, or those whose name contains one of the arguments (as cargo's test
# filter), longest first: the tests run $THREADS at a time, each in its own process, so one
# long test started last would end alone (libtest starts them in name order). The order is by
# each test's time in the last run that ran it ($HISTORY); a test not timed yet (a new one)
# starts first, then the rest by time, the longest first.
LOGS="$STATE_DIR/test-logs"
rm -rf "$LOGS"; mkdir -p "$LOGS"
mapfile -t TESTS < <((cd "$E2E_DIR" && "$EXE" --list --format terse) | python3 -c '
import sys
history, filters = sys.argv[1], sys.argv[2:]
times = {}
try:
    for line in open(history):
        if line.strip() and not line.startswith("#"):
            name, secs = line.split()
            times[name] = float(secs)
except (OSError, ValueError):
    pass
names = [l[: -len(": test")] for l in sys.stdin.read().splitlines() if l.endswith(": test")]
names = [n for n in names if not filters or any(f in n for f in filters)]
print("\n".join(sorted(names, key=lambda n: (n in times, -times.get(n, 0), n))))
' "$HISTORY" "$@")
[[ ${#TESTS[@]} -gt 0 ]] || die "no e2e test matches: $*"

# run_test NAME: the test alone in its own process (as cargo runs it: in the package's
# directory), its output in $LOGS/NAME.log; the exit status and the seconds in NAME.rc.
run_test() {
  local name=$1 t0=$SECONDS rc=0
  # --nocapture: a passing test's figures (fail-over gaps, move times) stay in its log too.
  (cd "$E2E_DIR" && "$EXE" --exact --nocapture "$name") >"$LOGS/$name.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - t0))" >"$LOGS/$name.rc"
  log "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED (exit $rc)") $name ($((SECONDS - t0)) s)"
}
is_exclusive() {
  local t
  for t in "${EXCLUSIVE[@]}"; do [[ "$1" == "$t" ]] && return 0; done
  return 1
}

pool=() alone=()
for t in "${TESTS[@]}"; do
  if is_exclusive "$t"; then alone+=("$t"); else pool+=("$t"); fi
done
log "e2e: ${#pool[@]} tests $THREADS at a time, longest first, then ${#alone[@]} alone"
t_pool=$SECONDS
running=0
for t in "${pool[@]}"; do
  if ((running >= THREADS)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_test "$t" &
  running=$((running + 1))
done
wait || true
log "e2e: the ${#pool[@]} tests $THREADS at a time took $((SECONDS - t_pool)) s"
failed=()
for t in "${pool[@]}"; do
  read -r rc _ <"$LOGS/$t.rc"
  [[ "$rc" == 0 ]] || failed+=("$t")
done
# The tests that must run alone, when every other test passed (as before: a failure stops here).
if [[ ${#failed[@]} -eq 0 ]]; then
  for t in "${alone[@]}"; do
    run_test "$t"
    read -r rc _ <"$LOGS/$t.rc"
    [[ "$rc" == 0 ]] || failed+=("$t")
  done
fi

# This run's times (each test's process, start to end) become the history; a test this run did
# not run keeps its time.
for t in "${pool[@]}" "${alone[@]}"; do
  if [[ -s "$LOGS/$t.rc" ]]; then echo "$t $(cut -d' ' -f2 "$LOGS/$t.rc")"; fi
done | python3 -c '
import sys
times = {}
for line in open(sys.argv[1]):
    if line.strip() and not line.startswith("#"):
        name, secs = line.split()
        times[name] = float(secs)
for line in sys.stdin:
    name, secs = line.split()
    times[name] = float(secs)
with open(sys.argv[1], "w") as f:
    for name in sorted(times):
        f.write(f"{name} {times[name]:.0f}\n")
' "$HISTORY"

for t in "${failed[@]}"; do
  echo "---- $t FAILED; its output ($LOGS/$t.log):" >&2
  cat "$LOGS/$t.log" >&2
done
total=$(( ${#pool[@]} + ${#alone[@]} ))
if [[ ${#failed[@]} -gt 0 ]]; then
  die "e2e: ${#failed[@]} of $total tests failed: ${failed[*]}$([[ -e "$LOGS/${alone[0]:-none}.rc" || ${#alone[@]} -eq 0 ]] || echo " (not run, as a test failed first: ${alone[*]})")"
fi
log "e2e: all $total tests passed"
