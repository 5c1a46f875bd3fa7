#!/usr/bin/env bash
# The Kubernetes demo (`make demo`): Starling's main job on its embedded default.
#   1. a local single-node Kubernetes, the images and the operator (e2e/setup.sh; the first run
#      on a machine builds Kubernetes from source and takes ~15 minutes, later runs seconds),
#   2. the small/balanced example BrokerCluster in namespace starling-demo, until Ready,
#   3. a subscriber and a publisher on the host, through the BrokerCluster's client Service,
#   4. what to try next. The cluster keeps running; `e2e/cluster/down.sh` stops it.
# With STARLING_USE_EXISTING_CLUSTER=1 and KUBECONFIG set it targets that cluster instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source e2e/cluster/lib.sh

e2e/setup.sh
# shellcheck disable=SC1091
source "$STATE_DIR/e2e.env"
cargo build --release -q -p starling-cli
CLI=target/release/starling

NS=starling-demo
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -n "$NS" -f manifests/examples/small-balanced.yaml
log "waiting for BrokerCluster small-balanced to become Ready"
for _ in $(seq 1 120); do
  ready=$(kubectl get sbc small-balanced -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  [[ "$ready" == True ]] && break
  sleep 1
done
[[ "$ready" == True ]] || { kubectl describe bc small-balanced -n "$NS"; die "the BrokerCluster did not become Ready"; }
kubectl get sbc -n "$NS"

IP=$(kubectl get svc small-balanced -n "$NS" -o jsonpath='{.spec.clusterIP}')
SERVER="$IP:7400"
log "subscribing and publishing through the client Service ($SERVER)"
# The brokers generate their own certificate here; --insecure skips verification (demo only).
"$CLI" --server "$SERVER" --insecure sub demo --count 3 2>/dev/null >"$STATE_DIR/demo-sub.out" &
SUB=$!
for _ in $(seq 1 50); do
  pod_ip=$(kubectl get pod small-balanced-0 -n "$NS" -o jsonpath='{.status.podIP}')
  curl -fsS "http://$pod_ip:9400/metrics" 2>/dev/null | grep -q '^starling_subscriptions 1' && break
  sleep 0.2
done
for msg in "hello from Kubernetes" "second message" "third and last"; do
  "$CLI" --server "$SERVER" --insecure pub demo "$msg" --ack 2>/dev/null
done
wait "$SUB"
echo "the subscriber received:"
sed 's/^/  /' "$STATE_DIR/demo-sub.out"
"$CLI" --server "$SERVER" --insecure cache put greeting "hi from the cache" --ttl 5m 2>/dev/null
echo "cache get greeting -> $("$CLI" --server "$SERVER" --insecure cache get greeting 2>/dev/null)"

cat <<NEXT

Starling is running in your local cluster. Try:
  source $STATE_DIR/e2e.env
  kubectl get sbc -n $NS                          # tier, profile, readiness
  kubectl patch bc small-balanced -n $NS --type merge -p '{"spec":{"profile":"latency"}}'
  curl -s http://$pod_ip:9400/metrics | grep ^starling_   # the broker's metrics
  $CLI --server $SERVER --insecure sub demo      # and publish from another terminal
Stop the cluster with: e2e/cluster/down.sh
NEXT
