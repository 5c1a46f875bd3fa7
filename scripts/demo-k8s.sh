#!/usr/bin/env bash
# The Kubernetes demo (`make demo`): Starling's main job on its embedded default.
#   1. a local single-node Kubernetes, the images and the operator (e2e/setup.sh; the first run
#      on a machine builds Kubernetes from source and takes ~15 minutes, later runs seconds),
#   2. the small/balanced example in namespace starling-demo: a BrokerCluster and a BrokerUser
#      (demo-app, a token user allowed `demo.>`), until both are Ready,
#   3. the user's credentials Secret copied into a directory on the host, and a subscriber and
#      a publisher on the host using it (`starling --credentials DIR`), through the
#      BrokerCluster's client Service; then one operation outside the user's patterns, refused,
#   4. what to try next. The cluster keeps running; `e2e/cluster/down.sh` stops it.
# With STARLING_USE_EXISTING_CLUSTER=1 and KUBECONFIG set it targets that cluster instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source e2e/cluster/lib.sh

e2e/setup.sh
# shellcheck disable=SC1091
source "$STATE_DIR/e2e.env"
# e2e/setup.sh built the CLI with the broker and the operator (in $STARLING_CARGO_PROFILE).
CLI="$STARLING_CLI"

NS=starling-demo
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -n "$NS" -f manifests/examples/small-balanced.yaml
log "waiting for BrokerCluster small-balanced and BrokerUser demo-app to become Ready"
ready() { # ready KIND NAME: the Ready condition's status
  kubectl get "$1" "$2" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true
}
for _ in $(seq 1 120); do
  [[ "$(ready brokercluster small-balanced)" == True && "$(ready brokeruser demo-app)" == True ]] && break
  sleep 1
done
[[ "$(ready brokercluster small-balanced)" == True ]] || { kubectl describe sbc small-balanced -n "$NS"; die "the BrokerCluster did not become Ready"; }
[[ "$(ready brokeruser demo-app)" == True ]] || { kubectl describe brokeruser demo-app -n "$NS"; die "the BrokerUser did not become Ready"; }
kubectl get sbc,brokeruser -n "$NS"

# The user's Secret, as a pod would mount it: token, ca.crt (the brokers' CA) and address.
SECRET=$(kubectl get brokeruser demo-app -n "$NS" -o jsonpath='{.status.secretName}')
CREDS="$STATE_DIR/demo-credentials"
rm -rf "$CREDS"; mkdir -p "$CREDS"; chmod 700 "$CREDS"
kubectl get secret "$SECRET" -n "$NS" -o json | python3 -c '
import base64, json, os, sys
for key, value in json.load(sys.stdin)["data"].items():
    with open(os.path.join(sys.argv[1], key), "wb") as f:
        f.write(base64.b64decode(value))
' "$CREDS"
log "credentials of BrokerUser demo-app (Secret $SECRET) in $CREDS: $(ls "$CREDS" | tr '\n' ' ')"

# The Secret's address (<cluster>.<namespace>.svc:7400) resolves only inside the cluster: from
# the host, go to the Service's ClusterIP and verify the brokers' certificate by that name.
IP=$(kubectl get svc small-balanced -n "$NS" -o jsonpath='{.spec.clusterIP}')
SERVER="$IP:7400"
NAME=$(cut -d: -f1 "$CREDS/address")
AS_USER=(--credentials "$CREDS" --server "$SERVER" --server-name "$NAME")
log "subscribing and publishing as demo-app through the client Service ($SERVER, certificate checked for $NAME)"
"$CLI" "${AS_USER[@]}" sub demo.greetings --count 3 2>"$STATE_DIR/demo-sub.err" >"$STATE_DIR/demo-sub.out" &
SUB=$!
for _ in $(seq 1 50); do
  pod_ip=$(kubectl get pod small-balanced-0 -n "$NS" -o jsonpath='{.status.podIP}')
  curl -fsS "http://$pod_ip:9400/metrics" 2>/dev/null | grep -q '^starling_subscriptions 1' && break
  sleep 0.2
done
for msg in "hello from Kubernetes" "second message" "third and last"; do
  "$CLI" "${AS_USER[@]}" pub demo.greetings "$msg" --ack
done
wait "$SUB" || { cat "$STATE_DIR/demo-sub.err" >&2; die "the subscriber failed"; }
echo "the subscriber received:"
sed 's/^/  /' "$STATE_DIR/demo-sub.out"
"$CLI" "${AS_USER[@]}" cache put demo.greeting "hi from the cache" --ttl 5m
echo "cache get demo.greeting -> $("$CLI" "${AS_USER[@]}" cache get demo.greeting)"
echo "outside its patterns, demo-app is refused:"
if "$CLI" "${AS_USER[@]}" pub payroll.salaries "not mine" --ack 2>"$STATE_DIR/demo-refused.err"; then
  die "a publish outside demo-app's patterns was accepted"
fi
sed 's/^/  /' "$STATE_DIR/demo-refused.err"

cat <<NEXT

Starling is running in your local cluster, with authentication on. Try:
  source $STATE_DIR/e2e.env
  kubectl get sbc,brokeruser -n $NS               # tier, profile, readiness; the users
  kubectl patch sbc small-balanced -n $NS --type merge -p '{"spec":{"profile":"latency"}}'
  curl -s http://$pod_ip:9400/metrics | grep -E '^starling_(auth|forbidden)'   # authentication and refusals
  $CLI ${AS_USER[*]} sub demo.greetings      # and publish from another terminal
  kubectl delete brokeruser demo-app -n $NS        # revoked: its connections close within seconds
Stop the cluster with: e2e/cluster/down.sh
NEXT
