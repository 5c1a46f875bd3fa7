#!/usr/bin/env bash
# Brings up everything the e2e suite and the Kubernetes demo need, idempotently:
#   1. the tools (Debian packages, Kubernetes binaries, helm; cached after the first run),
#   2. a local single-node cluster (skipped with STARLING_USE_EXISTING_CLUSTER=1 and KUBECONFIG),
#   3. the broker and operator images, built docker-less and imported into the node,
#   4. the CRD and the operator, helm-installed into starling-system with e2e/values-e2e.yaml,
#   5. the `starling` CLI, which the autoscaling test drives load with.
# Everything is built in one cargo invocation, in the profile $STARLING_CARGO_PROFILE (default
# `release`; `make test` and `make demo` set `ci`), while the cluster comes up: for the e2e
# suite (STARLING_E2E_BUILD=suite, set by e2e/run.sh) scripts/cargo-build.sh, the whole
# workspace with the e2e test binary; else the four binaries.
# Writes $STARLING_E2E_DIR/e2e.env with KUBECONFIG and the image refs for the next steps.
source "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"
cd "$REPO_ROOT"

if [[ "${STARLING_USE_EXISTING_CLUSTER:-0}" == 1 ]]; then
  [[ -n "${KUBECONFIG:-}" ]] || die "STARLING_USE_EXISTING_CLUSTER=1 needs KUBECONFIG"
  log "using the existing cluster in $KUBECONFIG"
  "$E2E_CLUSTER_DIR/install.sh"
fi
mkdir -p "$STATE_DIR"
PROFILE=${STARLING_CARGO_PROFILE:-release}
PROFILE_DIR=$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
# The cluster's start is mostly waiting (etcd, the API server, the node's readiness): the cargo
# build of every binary the e2e run needs goes on meanwhile, and image building finds it done.
up_pid=""
if [[ "${STARLING_USE_EXISTING_CLUSTER:-0}" != 1 ]]; then
  "$E2E_CLUSTER_DIR/install.sh"
  # The log lives outside $STATE_DIR: up.sh may wipe that dir (down.sh) before it starts.
  UP_LOG="$CACHE_DIR/logs/cluster-up.log"
  mkdir -p "${UP_LOG%/*}"
  "$E2E_CLUSTER_DIR/up.sh" > "$UP_LOG" 2>&1 &
  up_pid=$!
  export KUBECONFIG="$KUBECONFIG_PATH"
fi
# The e2e suite (e2e/run.sh sets STARLING_E2E_BUILD=suite): scripts/cargo-build.sh, the one
# cargo build of `make test`, which `make test`'s unit phase has already run (then this finds
# every unit fresh), and which builds the e2e test binary with the same features as the
# binaries in the images, so e2e/run.sh compiles nothing more. Otherwise (`make demo`): the
# binaries the demo needs, in one invocation.
build_rc=0
if [[ "${STARLING_E2E_BUILD:-bins}" == suite ]]; then
  log "cargo build --profile $PROFILE of the workspace (scripts/cargo-build.sh): the images' binaries, the CLI and bench the tests drive, the e2e test binary"
  STARLING_CARGO_PROFILE=$PROFILE "$REPO_ROOT/scripts/cargo-build.sh" -q || build_rc=$?
else
  log "cargo build --profile $PROFILE: broker, operator, CLI and bench (the autoscaling test's load generator)"
  cargo build --profile "$PROFILE" -q -p starling-broker -p starling-operator -p starling-cli -p starling-bench \
    || build_rc=$?
fi
if [[ -n "$up_pid" ]]; then
  up_rc=0
  wait "$up_pid" || up_rc=$?
  cat "$UP_LOG"
  [[ $up_rc -eq 0 ]] || die "the local cluster did not come up (exit $up_rc)"
fi
[[ $build_rc -eq 0 ]] || die "cargo build --profile $PROFILE failed"

# The binaries are built: the image script packs them without a cargo invocation of its own
# (one with `-p starling-broker` alone would unify features differently and compile again).
STARLING_IMAGES_PREBUILT=1 STARLING_CARGO_PROFILE=$PROFILE "$E2E_DIR/images/build.sh"
# shellcheck disable=SC1091
source "$STATE_DIR/images.env"
[[ -n "${BROKER_IMAGE:-}" && -n "${OPERATOR_IMAGE:-}" ]] || die "image build did not produce both images"

KUBECTL="$(bin kubectl)"; HELM="$(bin helm)"
[[ -n "$KUBECTL" && -n "$HELM" ]] || die "kubectl/helm missing from $BIN_DIR: run e2e/cluster/install.sh"
export PATH="$BIN_DIR:$PATH"
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml

if [[ "${STARLING_SKIP_CHART_TEST:-0}" != 1 ]]; then
  # Chart checks against this API server before the real install: lint, schema refusals,
  # server-side dry runs, and the operator running under exactly the chart's permissions.
  STARLING_REQUIRE_CLUSTER=1 STARLING_OPERATOR_BIN="$TARGET_DIR/$PROFILE_DIR/starling-operator" \
    "$REPO_ROOT/charts/test.sh" "$KUBECONFIG"
fi
log "applying the CRD (server-side, so upgrades apply too)"
"$KUBECTL" apply --server-side --force-conflicts -f crds/
log "installing the operator with helm ($OPERATOR_IMAGE, brokers $BROKER_IMAGE)"
"$HELM" upgrade --install starling-operator charts/starling-operator \
  --namespace starling-system --create-namespace \
  --values "$E2E_DIR/values-e2e.yaml" \
  --set image.repository="${OPERATOR_IMAGE%:*}" --set image.tag="${OPERATOR_IMAGE##*:}" \
  --set brokerImage="$BROKER_IMAGE" \
  --wait --timeout 5m
STARLING_CLI="$TARGET_DIR/$PROFILE_DIR/starling"
cat > "$STATE_DIR/e2e.env" <<ENV
export KUBECONFIG=$KUBECONFIG
export STARLING_CLI=$STARLING_CLI
export STARLING_E2E_BROKER_IMAGE=$BROKER_IMAGE
export STARLING_E2E_OPERATOR_IMAGE=$OPERATOR_IMAGE
export STARLING_E2E_OPERATOR_NAMESPACE=starling-system
export PATH=$BIN_DIR:\$PATH
ENV
log "ready: source $STATE_DIR/e2e.env"
