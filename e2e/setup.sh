#!/usr/bin/env bash
# Brings up everything the e2e suite and the Kubernetes demo need, idempotently:
#   1. the tools (Debian packages, Kubernetes binaries, helm; cached after the first run),
#   2. a local single-node cluster (skipped with STARLING_USE_EXISTING_CLUSTER=1 and KUBECONFIG),
#   3. the broker and operator images, built docker-less and imported into the node,
#   4. the CRD and the operator, helm-installed into starling-system with e2e/values-e2e.yaml,
#   5. the `starling` CLI (release), which the autoscaling test drives load with.
# Writes $STARLING_E2E_DIR/e2e.env with KUBECONFIG and the image refs for the next steps.
source "$(dirname "${BASH_SOURCE[0]}")/cluster/lib.sh"
cd "$REPO_ROOT"

if [[ "${STARLING_USE_EXISTING_CLUSTER:-0}" == 1 ]]; then
  [[ -n "${KUBECONFIG:-}" ]] || die "STARLING_USE_EXISTING_CLUSTER=1 needs KUBECONFIG"
  log "using the existing cluster in $KUBECONFIG"
  "$E2E_CLUSTER_DIR/install.sh"
else
  "$E2E_CLUSTER_DIR/install.sh"
  "$E2E_CLUSTER_DIR/up.sh"
  export KUBECONFIG="$KUBECONFIG_PATH"
fi
mkdir -p "$STATE_DIR"

"$E2E_DIR/images/build.sh"
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
  STARLING_REQUIRE_CLUSTER=1 STARLING_OPERATOR_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/starling-operator" \
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
log "cargo build --release -p starling-cli -p starling-bench (load generator of the autoscaling test)"
cargo build --release -q -p starling-cli -p starling-bench || die "building the starling CLI and bench failed"
STARLING_CLI="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/starling"
cat > "$STATE_DIR/e2e.env" <<ENV
export KUBECONFIG=$KUBECONFIG
export STARLING_CLI=$STARLING_CLI
export STARLING_E2E_BROKER_IMAGE=$BROKER_IMAGE
export STARLING_E2E_OPERATOR_IMAGE=$OPERATOR_IMAGE
export STARLING_E2E_OPERATOR_NAMESPACE=starling-system
export PATH=$BIN_DIR:\$PATH
ENV
log "ready: source $STATE_DIR/e2e.env"
