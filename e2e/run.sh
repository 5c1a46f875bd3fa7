#!/usr/bin/env bash
# `make e2e`: set up the local cluster with the operator (e2e/setup.sh), run the Rust e2e suite
# against it, $STARLING_E2E_THREADS tests at a time (default 4: each test has its own namespace,
# and most of a test's time is spent waiting for pods and the operator), and tear the cluster
# down again (STARLING_E2E_KEEP=1 keeps it
# for debugging; an existing cluster given with STARLING_USE_EXISTING_CLUSTER=1 is never torn
# down).
#
#   e2e/run.sh              every test
#   e2e/run.sh access       only the tests whose name contains `access` (cargo's test filter;
#                           several filters may be given)
source "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"
cd "$REPO_ROOT"

teardown() {
  local rc=$?
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

"$E2E_DIR/setup.sh"
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
E2E=(cargo test --profile "${STARLING_CARGO_PROFILE:-release}" -p starling-e2e)
if [[ $# -gt 0 ]]; then
  "${E2E[@]}" -- --test-threads="${STARLING_E2E_THREADS:-4}" "$@"
else
  skips=()
  for t in "${EXCLUSIVE[@]}"; do skips+=(--skip "$t"); done
  "${E2E[@]}" -- --test-threads="${STARLING_E2E_THREADS:-4}" "${skips[@]}"
  for t in "${EXCLUSIVE[@]}"; do
    "${E2E[@]}" -- --exact "$t"
  done
fi
