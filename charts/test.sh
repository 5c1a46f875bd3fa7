#!/usr/bin/env bash
# Tests of the starling-operator chart and the files rendered from it.
#
#   charts/test.sh [KUBECONFIG]
#
# Always (no cluster needed):
#   1. helm lint --strict, with the default values and with ci/full-values.yaml;
#   2. values.schema.json and the chart's own checks refuse bad values with a clear message;
#   3. the rendered objects: least-privilege RBAC (no wildcard, namespaced and Secrets only in the watched namespaces when watchNamespaces
#      is set), the hardened operator pod, the tier overrides ConfigMap, the autoscaler's
#      --prometheus-* flags and the NetworkPolicy's egress to Prometheus, the PrometheusRule
#      (rules/starling.rules.yaml with the alert labels and runbook base URL) and the Grafana
#      dashboard ConfigMap (dashboards/starling.json, labelled for the Grafana sidecar), and the
#      `helm test` hook (its annotations and weights, the test user's permissions, the test
#      pod's security context, resources and deadline; none of it in manifests/install.yaml);
#   4. scripts/render-manifests.sh --check (no drift of manifests/install.yaml or the CRD copy).
# With a KUBECONFIG (argument, or the environment), against that cluster's API server:
#   5. server-side dry runs (strict field validation) of the chart with default and with full
#      values, of manifests/install.yaml, and of manifests/examples/*.yaml; the CRD's CEL rules
#      refuse a bad spec;
#   6. with a starling-operator binary (STARLING_OPERATOR_BIN, else target/release or
#      target/debug): the chart installed by helm, and the operator run on this machine as the
#      chart's ServiceAccount, does its whole job under exactly the chart's permissions.
#
# Steps 5 and 6 create short-lived namespaces (starling-chart-test-*) and delete them at the
# end. When the BrokerCluster CRD, or prometheus-operator's ServiceMonitor/PodMonitor API, is
# not served yet, they install it for the run (the latter from
# charts/testdata/monitoring-crds.yaml) and remove it afterwards.
# STARLING_REQUIRE_CLUSTER=1 makes a missing KUBECONFIG an error.
set -euo pipefail
cd "$(dirname "$0")/.."

CHART=charts/starling-operator
CACHE_BIN="${STARLING_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/starling}/bin"
pick() { # pick NAME ENV_OVERRIDE -> the tool to use
  if [[ -n "$2" ]]; then printf '%s\n' "$2"
  elif [[ -x "$CACHE_BIN/$1" ]]; then printf '%s\n' "$CACHE_BIN/$1"
  else command -v "$1" || true
  fi
}
HELM=$(pick helm "${HELM:-}")
KUBECTL=$(pick kubectl "${KUBECTL:-}")
[[ -n "$HELM" ]] || { echo "charts/test.sh: helm not found; run e2e/cluster/install.sh or set HELM" >&2; exit 2; }
export HELM

if [[ $# -gt 0 ]]; then export KUBECONFIG="$1"; fi

PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok   $*"; }
bad() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
WORK=$(mktemp -d)
CLEANUP=()
cleanup() {
  local i
  for ((i = ${#CLEANUP[@]} - 1; i >= 0; i--)); do
    eval "${CLEANUP[$i]}" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- 1. lint ---------------------------------------------------------------------------------
for values in "" "$CHART/ci/full-values.yaml"; do
  args=(lint --strict "$CHART")
  [[ -n "$values" ]] && args+=(-f "$values")
  if out=$("$HELM" "${args[@]}" 2>&1); then
    ok "helm lint --strict ${values:-(default values)}"
  else
    bad "helm lint --strict ${values:-(default values)}"; echo "$out"
  fi
done

# ---- 2. refused values -------------------------------------------------------------------
# refuse "WHAT" "EXPECTED MESSAGE PART" helm-args...
refuse() {
  local what=$1 want=$2; shift 2
  local out
  if out=$("$HELM" template t "$CHART" "$@" 2>&1 >/dev/null); then
    bad "refuses $what: it was accepted"
  elif [[ "$out" != *"$want"* ]]; then
    bad "refuses $what: message lacks '$want':"; echo "$out"
  else
    ok "refuses $what: $(grep -F -m1 -- "$want" <<<"$out" | sed "s/^Error: //")"
  fi
}
refuse "negative replicas" "at '/replicas': minimum: got -1" --set replicas=-1
refuse "replicas of the wrong type" "at '/replicas': got string, want integer" --set replicas=two
refuse "an unknown tier" "at '/tiers': additional properties 'huge' not allowed" --set tiers.huge.replicas=3
refuse "a tier with zero replicas" "at '/tiers/small/replicas': minimum: got 0, want 1" --set tiers.small.replicas=0
refuse "a tier memory that is no quantity" "at '/tiers/small/memory/request'" --set tiers.small.memory.request=lots
refuse "an unknown tier field" "at '/tiers/medium': additional properties 'cores' not allowed" --set tiers.medium.cores=4
refuse "a tier capacity of zero" "at '/tiers/large/capacityMsgsPerSec': minimum: got 0, want 1" --set tiers.large.capacityMsgsPerSec=0
refuse "a Prometheus URL with another scheme" "at '/autoscaler/prometheusUrl'" --set autoscaler.prometheusUrl=ftp://prometheus:9090
refuse "a Prometheus URL without http(s)://" "at '/autoscaler/prometheusUrl'" --set autoscaler.prometheusUrl=prometheus:9090
refuse "two Prometheus bearer tokens" "set serviceAccount or secretName, not both" \
  --set autoscaler.prometheusUrl=https://prometheus --set autoscaler.prometheusBearerToken.serviceAccount=true \
  --set autoscaler.prometheusBearerToken.secretName=reader
refuse "a Prometheus rate window that is no duration" "at '/autoscaler/prometheusRateWindow'" \
  --set autoscaler.prometheusUrl=http://prometheus:9090 --set autoscaler.prometheusRateWindow=often
refuse "a misspelt value" "additional properties 'replica' not allowed" --set replica=2
refuse "an unknown pull policy" "at '/image/pullPolicy': value must be one of" --set image.pullPolicy=Sometimes
refuse "a namespace that is no DNS label" "at '/watchNamespaces/0'" --set 'watchNamespaces={Team_A}'
refuse "an unknown log format" "at '/logging/format'" --set logging.format=xml
refuse "a metrics port out of range" "at '/metrics/port': maximum" --set metrics.port=70000
refuse "a scrape interval that is no duration" "at '/monitoring/podMonitor/interval'" --set monitoring.podMonitor.interval=often
refuse "two replicas without leader election" "without a Lease every replica would reconcile" \
  --set replicas=2 --set leaderElection.enabled=false
refuse "a ServiceMonitor without the metrics Service" "the ServiceMonitor selects the metrics Service" \
  --set monitoring.serviceMonitor.enabled=true --set metrics.service.enabled=false
refuse "a dashboard namespace that is no DNS label" "at '/monitoring/dashboard/namespace'" \
  --set monitoring.dashboard.enabled=true --set monitoring.dashboard.namespace=Grafana_NS
refuse "a misspelt monitoring value" "additional properties 'runbookUrl' not allowed" \
  --set monitoring.prometheusRule.runbookUrl=https://x
refuse "a test namespace that is not watched" "tests.namespace elsewhere is not one of watchNamespaces" \
  --set 'watchNamespaces={team-a}' --set tests.namespace=elsewhere
refuse "a test topic with a wildcard" "at '/tests/topic'" --set 'tests.topic=orders.>'
refuse "an unknown test authentication" "at '/tests/authentication': value must be one of" --set tests.authentication=password
refuse "a test cluster name that is no DNS label" "at '/tests/brokerCluster'" --set tests.brokerCluster=My_Cluster
refuse "an existing ServiceAccount without a name" "serviceAccount.name must name an existing ServiceAccount" \
  --set serviceAccount.create=false

# ---- 3. rendered objects -------------------------------------------------------------------
"$HELM" template t "$CHART" --namespace ops >"$WORK/default.yaml"
"$HELM" template t "$CHART" --namespace ops -f "$CHART/ci/full-values.yaml" >"$WORK/full.yaml"
if python3 - "$WORK/default.yaml" "$WORK/full.yaml" "$CHART" >"$WORK/objects.out" 2>&1 <<'PY'
import json
import sys
import yaml

def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]

def kinds(docs, kind):
    return [d for d in docs if d["kind"] == kind]

failures = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)

default, full = load(sys.argv[1]), load(sys.argv[2])
WANT_RULES = {
    ("starling.dev", "brokerclusters"): {"get", "list", "watch"},
    ("starling.dev", "brokerclusters/status"): {"patch"},
    ("starling.dev", "brokerclusters/finalizers"): {"update"},
    ("starling.dev", "brokerusers"): {"list", "watch"},
    ("starling.dev", "brokerusers/status"): {"patch"},
    ("starling.dev", "brokerusers/finalizers"): {"update"},
    ("starling.dev", "brokertopics"): {"list", "watch"},
    ("starling.dev", "brokertopics/status"): {"patch"},
    ("networking.k8s.io", "networkpolicies"): {"list", "watch", "create", "patch"},
    ("apps", "statefulsets"): {"get", "list", "watch", "create", "patch"},
    ("", "configmaps"): {"get", "list", "watch", "create", "patch"},
    ("", "secrets"): {"get", "create", "patch"},
    ("", "pods"): {"list"},
    ("discovery.k8s.io", "endpointslices"): {"list"},
    ("rbac.authorization.k8s.io", "roles"): {"list", "watch", "create", "patch"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"list", "watch", "create", "patch"},
    ("", "services"): {"list", "watch", "create", "patch"},
    ("", "serviceaccounts"): {"list", "watch", "create", "patch"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch", "create", "patch", "delete"},
    ("events.k8s.io", "events"): {"create", "patch"},
}
def grants(role):
    out = {}
    for r in role["rules"]:
        for g in r["apiGroups"]:
            for res in r["resources"]:
                out.setdefault((g, res), set()).update(r["verbs"])
    return out

for name, docs in (("default", default), ("full", full)):
    for role in kinds(docs, "ClusterRole") + kinds(docs, "Role"):
        flat = [x for r in role["rules"] for x in r["apiGroups"] + r["resources"] + r["verbs"]]
        check("*" not in flat, f"{name}: {role['kind']} {role['metadata']['name']} has no wildcard")

crs = kinds(default, "ClusterRole")
check(len(crs) == 1 and grants(crs[0]) == WANT_RULES,
      "default: one ClusterRole with exactly the operator's verbs")
check(len(crs) == 1 and grants(crs[0]).get(("", "configmaps"), set()) >= {"get", "list", "watch"},
      "default: the operator holds get/list/watch on configmaps, which the brokers' Role grants (RBAC escalation check)")
check(len(crs) == 1 and grants(crs[0]).get(("discovery.k8s.io", "endpointslices"), set()) >= {"list"},
      "default: the operator holds list on endpointslices, which the brokers' Role grants (RBAC escalation check)")
check(len(crs) == 1 and grants(crs[0]).get(("", "secrets"), set()) >= {"get"},
      "default: the operator holds get on secrets, which the brokers' Role grants on <c>-users (RBAC escalation check)")
check(not kinds(full, "ClusterRole") and not kinds(full, "ClusterRoleBinding"),
      "watchNamespaces: no cluster-wide RBAC")
watch_roles = [r for r in kinds(full, "Role") if not r["metadata"]["name"].endswith("-leader-election")]
check(sorted(r["metadata"]["namespace"] for r in watch_roles) == ["team-a", "team-b"]
      and all(grants(r) == WANT_RULES for r in watch_roles),
      "watchNamespaces: a Role with exactly the operator's verbs in each watched namespace")
secret_scopes = sorted(
    r["metadata"].get("namespace", "<cluster-wide>")
    for r in kinds(full, "Role") + kinds(full, "ClusterRole")
    if ("", "secrets") in grants(r))
check(secret_scopes == ["team-a", "team-b"],
      f"watchNamespaces: Secrets access only in the watched namespaces (got {secret_scopes})")
check(sorted(b["metadata"]["namespace"] for b in kinds(full, "RoleBinding")) == ["ops", "team-a", "team-b"],
      "watchNamespaces: a RoleBinding per watched namespace, plus the Lease one")
for name, docs, lease in (("default", default, "t-starling-operator"), ("full", full, "starling-operator-test")):
    le = [r for r in kinds(docs, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    ok = len(le) == 1 and le[0]["metadata"]["namespace"] == "ops" and le[0]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease], "verbs": ["get", "update"]},
    ]
    check(ok, f"{name}: Lease permissions only in the release namespace, get/update only on {lease}")

def deployment(docs):
    (d,) = kinds(docs, "Deployment")
    return d
for name, docs in (("default", default), ("full", full)):
    d = deployment(docs)
    pod = d["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    sc, psc = c["securityContext"], pod["securityContext"]
    check(psc["runAsNonRoot"] and psc["runAsUser"] == 65532 and psc["seccompProfile"]["type"] == "RuntimeDefault"
          and sc["readOnlyRootFilesystem"] and sc["allowPrivilegeEscalation"] is False
          and sc["capabilities"]["drop"] == ["ALL"] and sc["runAsUser"] == 65532,
          f"{name}: hardened securityContext")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz",
          f"{name}: probes on /healthz and /readyz")
    env = {e["name"]: e for e in c["env"]}
    check(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
          and env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace",
          f"{name}: POD_NAME and POD_NAMESPACE from the downward API")
    check("requests" in c["resources"], f"{name}: resource requests")

d = deployment(default)
(c,) = d["spec"]["template"]["spec"]["containers"]
check(c["image"] == "starling/operator:0.1.0" and c["imagePullPolicy"] == "IfNotPresent",
      "default: image starling/operator:<appVersion>, IfNotPresent")
check("--cluster-domain=cluster.local" in c["args"] and "--handoff-grace-seconds=15" in c["args"],
      "default: cluster domain cluster.local, hand-off grace 15 s")
check("--broker-image=starling/broker:0.1.0" in c["args"] and "--leader-election=true" in c["args"]
      and d["spec"]["replicas"] == 1, "default: broker image starling/broker:<appVersion>, leader election, 1 replica")
(cm,) = [x for x in kinds(default, "ConfigMap") if x["metadata"]["name"].endswith("-tiers")]
check(yaml.safe_load(cm["data"]["tiers.yaml"]) == {}, "default: empty tier overrides")
check(not [a for a in c["args"] if a.startswith("--prometheus-")],
      "default: no --prometheus-* flags (the autoscaler scrapes the broker pods directly)")
check(not [x for x in default if x["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "NetworkPolicy")]
      and not [x for x in kinds(default, "ConfigMap") if x["metadata"]["name"].endswith("-dashboard")],
      "default: no monitoring objects, no dashboard and no NetworkPolicy")

d = deployment(full)
(c,) = d["spec"]["template"]["spec"]["containers"]
check("--cluster-domain=corp.example" in c["args"] and "--handoff-grace-seconds=30" in c["args"],
      "full: cluster domain and hand-off grace reach the operator")
check("--watch-namespaces=team-a,team-b" in c["args"] and "--broker-image=registry.example/starling/broker:dev" in c["args"]
      and d["spec"]["replicas"] == 2, "full: watched namespaces, broker image and 2 replicas reach the operator")
(cm,) = [x for x in kinds(full, "ConfigMap") if x["metadata"]["name"].endswith("-tiers")]
check(yaml.safe_load(cm["data"]["tiers.yaml"]) == {
    "small": {"replicas": 1, "cpuRequest": "100m", "cpuLimit": "500m", "memoryRequest": "128Mi", "memoryLimit": "256Mi"},
    "medium": {"replicas": 3, "cpuRequest": "250m", "cpuLimit": "1"},
    "large": {"memoryRequest": "1Gi", "memoryLimit": "2Gi", "capacityMsgsPerSec": 250000},
}, "full: tier overrides in the --tier-overrides format, only the set fields, quantities as strings")
check({"name": "STARLING_OPERATOR_TIER_OVERRIDES", "value": "/etc/starling-operator/tiers.yaml"} in c["env"]
      and {"name": "tiers", "mountPath": "/etc/starling-operator", "readOnly": True} in c["volumeMounts"],
      "full: the overrides file is mounted and named in STARLING_OPERATOR_TIER_OVERRIDES")
volumes = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
check("--prometheus-ca=/etc/starling-operator/prometheus-ca/ca.pem" in c["args"]
      and {"name": "prometheus-ca", "mountPath": "/etc/starling-operator/prometheus-ca", "readOnly": True} in c["volumeMounts"]
      and volumes["prometheus-ca"]["secret"] == {"secretName": "prometheus-ca", "items": [{"key": "ca.pem", "path": "ca.pem"}]},
      "full: autoscaler.prometheusCaSecret is mounted and named in --prometheus-ca")
check("--prometheus-token-file=/etc/starling-operator/prometheus-token/token" in c["args"]
      and {"name": "prometheus-token", "mountPath": "/etc/starling-operator/prometheus-token", "readOnly": True} in c["volumeMounts"]
      and volumes["prometheus-token"]["secret"] == {"secretName": "prometheus-reader", "items": [{"key": "token", "path": "token"}]},
      "full: autoscaler.prometheusBearerToken.secretName is mounted and named in --prometheus-token-file")
(pm,) = kinds(full, "PodMonitor")
check(pm["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "starling-broker",
                                                "app.kubernetes.io/managed-by": "starling-operator"}
      and pm["spec"]["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}
      and pm["spec"]["podMetricsEndpoints"][0]["port"] == "http",
      "full: PodMonitor selects the broker pods' labels and http port in the watched namespaces")
check(len(kinds(full, "ServiceMonitor")) == 1 and len(kinds(full, "NetworkPolicy")) == 1,
      "full: ServiceMonitor and NetworkPolicy rendered")
check("--prometheus-url=https://prometheus-operated.monitoring/prom" in c["args"]
      and '--prometheus-selector=kubernetes_namespace="{namespace}",kubernetes_pod_name=~"{name}-[0-9]+"' in c["args"]
      and "--prometheus-rate-window=2m" in c["args"],
      "full: autoscaler.prometheusUrl, prometheusSelector and prometheusRateWindow reach the operator")
(np,) = kinds(full, "NetworkPolicy")
check({"ports": [{"port": 443, "protocol": "TCP"}],
       "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]} in np["spec"]["egress"],
      "full: the NetworkPolicy lets the operator reach Prometheus's port (443 for an https URL without one), at prometheusPeers")

# The `helm test` hook (templates/tests/): a throwaway cluster (default) or the named one, a
# least-privilege user, and a hardened, bounded pod that runs `starling check` as that user.
def hooks(docs):
    return [d for d in docs if d["metadata"].get("annotations", {}).get("helm.sh/hook")]
for name, docs in (("default", default), ("full", full)):
    hs = hooks(docs)
    check(all(h["metadata"]["annotations"]["helm.sh/hook"] == "test" for h in hs),
          f"{name}: every hook of the chart is a test hook")
    by_kind = {h["kind"]: h for h in hs}
    want_kinds = ["BrokerCluster", "BrokerUser", "Pod"] if name == "default" else ["BrokerUser", "Pod"]
    check(sorted(by_kind) == sorted(want_kinds) and len(hs) == len(want_kinds),
          f"{name}: the test hook is {', '.join(want_kinds)}")
    weights = {k: int(h["metadata"]["annotations"].get("helm.sh/hook-weight", "0")) for k, h in by_kind.items()}
    order = [k for k in ["BrokerCluster", "BrokerUser", "Pod"] if k in weights]
    check([weights[k] for k in order] == sorted(weights.values()) and len(set(weights.values())) == len(weights),
          f"{name}: hook weights order {' < '.join(order)}")
    policies = {k: set(h["metadata"]["annotations"]["helm.sh/hook-delete-policy"].split(","))
                for k, h in by_kind.items()}
    check(policies.get("Pod") == {"before-hook-creation"}
          and all(policies[k] == {"before-hook-creation", "hook-succeeded"} for k in by_kind if k != "Pod"),
          f"{name}: delete policies: before-hook-creation everywhere (repeated runs), hook-succeeded on the cluster and user, the pod kept for --logs")
    user, pod = by_kind.get("BrokerUser"), by_kind.get("Pod")
    if not (user and pod):
        continue
    topic = "starling-helm-test" if name == "default" else "smoke.ci"
    check(user["spec"]["permissions"] == {"publish": {"allow": [topic]}, "subscribe": {"allow": [topic]}},
          f"{name}: the test user may publish and subscribe {topic} and nothing else")
    ns = "ops" if name == "default" else "team-a"
    check({h["metadata"]["namespace"] for h in hs} == {ns},
          f"{name}: the hook's objects are in {ns} ({'the release namespace' if name == 'default' else 'the first watched namespace'})")
    cluster = "t-starling-operator-test" if name == "default" else "events"
    check(user["spec"]["cluster"] == cluster
          and (name != "default" or by_kind["BrokerCluster"]["metadata"]["name"] == cluster),
          f"{name}: the user belongs to {cluster} ({'the throwaway cluster' if name == 'default' else 'tests.brokerCluster'})")
    if name == "default":
        check(by_kind["BrokerCluster"]["spec"] == {"tier": "small", "profile": "balanced", "replicas": 1},
              "default: the throwaway cluster is one broker of the small tier")
    spec = pod["spec"]
    (c,) = spec["containers"]
    sc, psc = c["securityContext"], spec["securityContext"]
    check(psc["runAsNonRoot"] and psc["runAsUser"] == 65532 and psc["seccompProfile"]["type"] == "RuntimeDefault"
          and sc["readOnlyRootFilesystem"] and sc["allowPrivilegeEscalation"] is False
          and sc["capabilities"]["drop"] == ["ALL"] and sc["runAsNonRoot"],
          f"{name}: test pod securityContext: non-root, read-only root fs, no capabilities, RuntimeDefault seccomp")
    check(c["resources"].get("requests", {}).get("cpu") and c["resources"].get("requests", {}).get("memory")
          and c["resources"].get("limits", {}).get("memory"),
          f"{name}: test pod resource requests and a memory limit")
    retry = next((int(a.split("=", 1)[1].rstrip("s")) for a in c["args"] if a.startswith("--retry-for=")), None)
    check(spec["restartPolicy"] == "Never" and retry is not None and spec["activeDeadlineSeconds"] > retry,
          f"{name}: test pod never restarts, and activeDeadlineSeconds ({spec.get('activeDeadlineSeconds')}) ends it after its retries ({retry} s)")
    check(spec["automountServiceAccountToken"] is False, f"{name}: test pod has no API token")
    (vol,) = spec["volumes"]
    check(c["command"] == ["/usr/local/bin/starling"]
          and "--credentials=/var/run/starling/credentials" in c["args"]
          and c["args"][c["args"].index("check") + 1] == topic
          and vol["secret"]["secretName"] == user["spec"]["secretName"]
          and c["volumeMounts"] == [{"name": vol["name"], "mountPath": "/var/run/starling/credentials", "readOnly": True}],
          f"{name}: test pod runs `starling check {topic}` with the test user's Secret mounted as --credentials")
    image = "starling/broker:0.1.0" if name == "default" else "registry.example/starling/cli:dev"
    check(c["image"] == image, f"{name}: test pod image {image}")
    d = deployment(docs)
    selector = d["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"]["labels"]
    check(not all(labels.get(k) == v for k, v in selector.items())
          and labels.get("app.kubernetes.io/name") != "starling-operator",
          f"{name}: the test pod is no operator pod (Deployment selector, Service, brokers' NetworkPolicy)")
    if name == "full":
        check(labels.get("starling.dev/client") == "smoke", "full: tests.podLabels on the test pod")
check(not [d for d in load("manifests/install.yaml") if d["metadata"].get("annotations", {}).get("helm.sh/hook")],
      "manifests/install.yaml holds no hook (render-manifests.sh --skip-tests)")

# The observability pack: one rule file and one dashboard file feed the objects unchanged.
chart = sys.argv[3]
rule_file = yaml.safe_load(open(f"{chart}/rules/starling.rules.yaml"))
dashboard_file = json.load(open(f"{chart}/dashboards/starling.json"))
prs = kinds(full, "PrometheusRule")
check(len(prs) == 1 and prs[0]["metadata"]["namespace"] == "ops"
      and prs[0]["metadata"]["labels"].get("release") == "prometheus",
      "full: one PrometheusRule in the release namespace, with monitoring.prometheusRule.labels")
if prs:
    got = prs[0]["spec"]["groups"]
    want = json.loads(json.dumps(rule_file["groups"]))
    for g in want:
        for r in g["rules"]:
            r["labels"] = {**{"team": "messaging"}, **r.get("labels", {})}
            r["annotations"]["runbook_url"] = "https://git.example/starling/blob/v0.1.0/" + r["annotations"]["runbook_url"]
    check(got == want, "full: the PrometheusRule is rules/starling.rules.yaml, plus alertLabels and the runbook base URL")
    alerts = [r for g in got for r in g["rules"] if "alert" in r]
    check(sorted(r["alert"] for r in alerts) == sorted([
        "StarlingBrokerNotReady", "StarlingEventsDropped", "StarlingPeerDown", "StarlingLanesStalled",
        "StarlingRetentionAtCap", "StarlingTopicUnderReplicated", "StarlingTopicLeaderless",
        "StarlingReplicaLeaderChurn", "StarlingOperatorReconcileErrors", "StarlingAutoscalerStuck",
        "StarlingDiskFull", "StarlingUsersTableStale"]),
          "full: the twelve alerts")
    check(all(r["annotations"].get("summary") and r["annotations"].get("description")
              and r["annotations"]["runbook_url"].endswith("docs/operations.md#" + r["alert"].lower())
              and r["labels"].get("severity") in ("warning", "critical") for r in alerts),
          "full: every alert has a severity, a summary, a description and a runbook_url to its docs/operations.md section")
    runbooks = open("docs/operations.md").read()
    check(all(f"\n### {r['alert']}\n" in runbooks for r in alerts),
          "docs/operations.md has a runbook section for every alert")
dash_cms = [x for x in kinds(full, "ConfigMap") if x["metadata"]["name"].endswith("-dashboard")]
check(len(dash_cms) == 1 and dash_cms[0]["metadata"]["namespace"] == "monitoring"
      and dash_cms[0]["metadata"]["labels"].get("grafana_dashboard") == "1"
      and dash_cms[0]["metadata"].get("annotations") == {"grafana_folder": "Messaging"},
      "full: the dashboard ConfigMap in monitoring.dashboard.namespace, labelled grafana_dashboard: \"1\", with its annotations")
if dash_cms:
    data = dash_cms[0]["data"]
    check(list(data) == ["starling.json"] and json.loads(data["starling.json"]) == dashboard_file,
          "full: the ConfigMap holds dashboards/starling.json unchanged")
panels = [p for p in dashboard_file["panels"] if p["type"] != "row"]
exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
for what, metric in [("publish rate", "starling_published_messages_total"), ("deliver rate", "starling_delivered_events_total"),
                     ("publish bytes", "starling_published_bytes_total"), ("deliver bytes", "starling_delivered_bytes_total"),
                     ("drops by reason", "starling_dropped_events_total"), ("lane queue depth", "starling_lane_queue_depth"),
                     ("latency histogram", "starling_delivery_latency_seconds_bucket"), ("connections", "starling_open_connections"),
                     ("subscriptions", "starling_subscriptions"), ("cache hits", "starling_cache_hits_total"),
                     ("cache misses", "starling_cache_misses_total"), ("peers up", "starling_cluster_peer_up"),
                     ("autoscaler decisions", "starling_operator_autoscale_decisions_total"),
                     ("reconcile errors", "starling_operator_reconcile_errors_total"),
                     ("reconcile durations", "starling_operator_reconcile_duration_seconds_bucket")]:
    check(metric in exprs, f"dashboard: a panel for {what} ({metric})")
check(len({p["id"] for p in dashboard_file["panels"]}) == len(dashboard_file["panels"])
      and all(t.get("datasource", {}).get("uid") == "${datasource}" for p in panels for t in p["targets"]),
      "dashboard: unique panel ids, every query on the ${datasource} picker")
sys.exit(1 if failures else 0)
PY
then objects_rc=0; else objects_rc=$?; fi
cat "$WORK/objects.out"
PASSED=$((PASSED + $(grep -c '^ok ' "$WORK/objects.out" || true)))
objects_failed=$(grep -c '^FAIL ' "$WORK/objects.out" || true)
if [[ $objects_rc -ne 0 && $objects_failed -eq 0 ]]; then
  objects_failed=1; echo "FAIL the rendered-object checks stopped with an error"
fi
FAILED=$((FAILED + objects_failed))

# ---- 4. drift ------------------------------------------------------------------------------
if out=$(scripts/render-manifests.sh --check 2>&1); then
  ok "scripts/render-manifests.sh --check"
else
  bad "scripts/render-manifests.sh --check"; echo "$out"
fi

# ---- 5. server-side dry runs ---------------------------------------------------------------

if [[ -z "${KUBECONFIG:-}" ]] || [[ -z "$KUBECTL" ]]; then
  if [[ "${STARLING_REQUIRE_CLUSTER:-0}" == 1 ]]; then
    bad "server-side dry run: no KUBECONFIG or no kubectl"
  else
    echo "skip server-side dry runs: no KUBECONFIG given"
  fi
else
  K=("$KUBECTL" --request-timeout=30s)
  DRY=(apply --server-side --dry-run=server --force-conflicts --field-manager=starling-chart-test)
  dry() { # dry WHAT FILE [namespace]
    local what=$1 file=$2 out
    if out=$("${K[@]}" "${DRY[@]}" -f "$file" 2>&1); then
      ok "server accepts $what ($(grep -c . <<<"$out") objects)"
    else
      bad "server accepts $what:"; echo "$out"
    fi
  }
  if ! "${K[@]}" get --raw /readyz >/dev/null 2>&1; then
    bad "API server at KUBECONFIG=$KUBECONFIG is not ready"
  else
    suffix=$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    NS=starling-chart-test-$suffix
    NS_A=$NS-a
    NS_B=$NS-b
    for ns in "$NS" "$NS_A" "$NS_B"; do
      "${K[@]}" create namespace "$ns" >/dev/null
      CLEANUP+=("${K[*]} delete namespace $ns --wait=false")
    done

    # kubectl wait fails at once on a CRD whose status has no conditions yet: poll instead.
    established() {
      local crd deadline=$((SECONDS + 30))
      for crd in "$@"; do
        until [[ "$("${K[@]}" get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]]; do
          [[ $SECONDS -lt $deadline ]] || { echo "CRD $crd is not Established after 30 s" >&2; return 1; }
          sleep 0.5
        done
      done
    }
    CRD=brokerclusters.starling.dev
    # A CRD still being deleted (by an earlier run) refuses new objects: wait until it is gone.
    not_terminating() {
      local crd deadline=$((SECONDS + 60))
      for crd in "$@"; do
        while [[ -n "$("${K[@]}" get crd "$crd" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]]; do
          [[ $SECONDS -lt $deadline ]] || { echo "CRD $crd is still being deleted after 60 s" >&2; return 1; }
          sleep 1
        done
      done
    }
    MONITORING_CRDS=(servicemonitors.monitoring.coreos.com podmonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com)
    not_terminating "$CRD" "${MONITORING_CRDS[@]}"
    if "${K[@]}" get crd "$CRD" >/dev/null 2>&1; then
      dry "crds/brokercluster.yaml" crds/brokercluster.yaml
      echo "note: $CRD already exists; the examples are checked against the served version"
    else
      CLEANUP+=("${K[*]} delete crd $CRD --ignore-not-found --wait=false")
      "${K[@]}" apply --server-side --field-manager=starling-chart-test -f crds/brokercluster.yaml >/dev/null
      established "$CRD"
      ok "server accepts crds/brokercluster.yaml (installed for this run)"
    fi
    USER_CRD=brokerusers.starling.dev
    not_terminating "$USER_CRD"
    if "${K[@]}" get crd "$USER_CRD" >/dev/null 2>&1; then
      dry "crds/brokeruser.yaml" crds/brokeruser.yaml
    else
      CLEANUP+=("${K[*]} delete crd $USER_CRD --ignore-not-found --wait=false")
      "${K[@]}" apply --server-side --field-manager=starling-chart-test -f crds/brokeruser.yaml >/dev/null
      established "$USER_CRD"
      ok "server accepts crds/brokeruser.yaml (installed for this run)"
    fi
    TOPIC_CRD=brokertopics.starling.dev
    not_terminating "$TOPIC_CRD"
    if "${K[@]}" get crd "$TOPIC_CRD" >/dev/null 2>&1; then
      dry "crds/brokertopic.yaml" crds/brokertopic.yaml
    else
      CLEANUP+=("${K[*]} delete crd $TOPIC_CRD --ignore-not-found --wait=false")
      "${K[@]}" apply --server-side --field-manager=starling-chart-test -f crds/brokertopic.yaml >/dev/null
      established "$TOPIC_CRD"
      ok "server accepts crds/brokertopic.yaml (installed for this run)"
    fi
    # Only the stand-ins of the kinds the server lacks, so real prometheus-operator CRDs stay.
    missing_crds=()
    served=$("${K[@]}" api-resources --api-group=monitoring.coreos.com -o name 2>/dev/null || true)
    for crd in "${MONITORING_CRDS[@]}"; do
      grep -qx "$crd" <<<"$served" || missing_crds+=("$crd")
    done
    if [[ ${#missing_crds[@]} -gt 0 ]]; then
      python3 - charts/testdata/monitoring-crds.yaml "${missing_crds[@]}" >"$WORK/monitoring-crds.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["metadata"]["name"] in sys.argv[2:]]
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
PY
      CLEANUP+=("${K[*]} delete -f $WORK/monitoring-crds.yaml --ignore-not-found --wait=false")
      "${K[@]}" apply --server-side --field-manager=starling-chart-test -f "$WORK/monitoring-crds.yaml" >/dev/null
      established "${missing_crds[@]}"
      echo "note: ${missing_crds[*]} not served; using charts/testdata/monitoring-crds.yaml for this run"
    fi

    "$HELM" template starling-chart-test "$CHART" --namespace "$NS" >"$WORK/ssa-default.yaml"
    dry "the chart with default values" "$WORK/ssa-default.yaml"
    "$HELM" template starling-chart-test "$CHART" --namespace "$NS" -f "$CHART/ci/full-values.yaml" \
      --set "watchNamespaces={$NS_A,$NS_B}" --set "monitoring.dashboard.namespace=$NS_B" >"$WORK/ssa-full.yaml"
    dry "the chart with ci/full-values.yaml" "$WORK/ssa-full.yaml"
    # install.yaml exactly, moved to the test namespace (it creates starling-system otherwise).
    python3 - "$NS" manifests/install.yaml >"$WORK/ssa-install.yaml" <<'PY'
import sys, yaml
ns = sys.argv[1]
out = []
for d in yaml.safe_load_all(open(sys.argv[2])):
    if not d or d["kind"] in ("Namespace", "CustomResourceDefinition"):
        continue
    if d["metadata"].get("namespace") == "starling-system":
        d["metadata"]["namespace"] = ns
    for s in d.get("subjects", []):
        if s.get("namespace") == "starling-system":
            s["namespace"] = ns
    out.append(d)
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
PY
    dry "manifests/install.yaml (in namespace $NS)" "$WORK/ssa-install.yaml"
    for f in manifests/examples/*.yaml; do
      if out=$("${K[@]}" "${DRY[@]}" -n "$NS_A" -f "$f" 2>&1); then
        ok "server accepts $f"
      else
        bad "server accepts $f:"; echo "$out"
      fi
    done
    # And the CRD's rules still refuse a bad spec (a CEL rule, not the chart).
    if out=$(printf '%s\n' 'apiVersion: starling.dev/v1alpha1' 'kind: BrokerCluster' \
        'metadata: {name: inverted}' 'spec: {autoscaling: {enabled: true, minTier: large, maxTier: small}}' |
        "${K[@]}" "${DRY[@]}" -n "$NS_A" -f - 2>&1); then
      bad "server refuses minTier > maxTier: it was accepted"
    elif [[ "$out" == *"autoscaling.minTier must not be a larger tier than autoscaling.maxTier"* ]]; then
      ok "server refuses minTier > maxTier with the CEL message"
    else
      bad "server refuses minTier > maxTier: unexpected message:"; echo "$out"
    fi
  fi
fi

# ---- 6. the operator under the chart's RBAC -------------------------------------------------
# The chart is installed for real (watchNamespaces mode, replicas 0: no operator pod), and a
# starling-operator binary runs on this machine as the chart's ServiceAccount (kubeconfig
# impersonation), reading the chart's tier overrides. Under exactly the chart's permissions it
# must hold its Lease, create every child of two BrokerClusters sized by those overrides, write
# their status and events, and delete the PDB when a cluster scales down to one broker. Broker
# pods may stay Pending: this checks permissions and sizing, not brokers.
find_operator() {
  if [[ -n "${STARLING_OPERATOR_BIN:-}" ]]; then printf '%s\n' "$STARLING_OPERATOR_BIN"; return; fi
  local t
  for t in "${CARGO_TARGET_DIR:-target}/release" "${CARGO_TARGET_DIR:-target}/debug"; do
    if [[ -x "$t/starling-operator" ]]; then printf '%s\n' "$t/starling-operator"; return; fi
  done
}
OPERATOR_BIN=$(find_operator)
OTHER_OPERATORS=""
if [[ -n "${NS:-}" ]]; then
  OTHER_OPERATORS=$("${K[@]}" get deployments -A -l app.kubernetes.io/name=starling-operator \
    -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {end}' 2>/dev/null || true)
fi
if [[ -z "${NS:-}" ]]; then
  :  # no cluster: step 5 said so
elif [[ -z "$OPERATOR_BIN" ]]; then
  echo "skip the RBAC run: no starling-operator binary (cargo build -p starling-operator, or set STARLING_OPERATOR_BIN)"
elif [[ -n "$OTHER_OPERATORS" ]]; then
  # Its reconciles of the test's clusters would mask missing permissions of the test's operator.
  echo "skip the RBAC run: a starling-operator already runs in this cluster (${OTHER_OPERATORS% }); run charts/test.sh before installing one"
else
  OP_NS=$NS
  APPS=$NS_B
  REL=starling-rbac-test
  SA=$REL-starling-operator
  CLEANUP+=("$HELM uninstall $REL --namespace $OP_NS --wait=false")
  if out=$("$HELM" install "$REL" "$CHART" --namespace "$OP_NS" --set replicas=0 \
      --set "watchNamespaces={$APPS}" --set tiers.small.cpu.request=50m \
      --set tiers.small.memory.request=64Mi --set tiers.small.memory.limit=192Mi \
      --set tiers.medium.replicas=2 2>&1); then
    ok "helm install (namespaced RBAC, no operator pod)"
  else
    bad "helm install:"; echo "$out"
  fi
  # The tier overrides exactly as the chart mounts them into the operator pod.
  "${K[@]}" get configmap -n "$OP_NS" "$REL-starling-operator-tiers" -o jsonpath='{.data.tiers\.yaml}' \
    >"$WORK/tiers.yaml"
  python3 - "$KUBECONFIG" "system:serviceaccount:$OP_NS:$SA" >"$WORK/as-operator.kubeconfig" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for user in config["users"]:
    user["user"]["as"] = sys.argv[2]
yaml.safe_dump(config, sys.stdout)
PY
  KUBECONFIG="$WORK/as-operator.kubeconfig" POD_NAMESPACE="$OP_NS" POD_NAME=rbac-test \
    STARLING_OPERATOR_TIER_OVERRIDES="$WORK/tiers.yaml" \
    "$OPERATOR_BIN" --metrics-addr 127.0.0.1:0 --watch-namespaces "$APPS" --lease-name "$SA" \
    --log-level info,kube=warn >"$WORK/operator.log" 2>&1 &
  OPERATOR_PID=$!
  # shellcheck disable=SC2016 # expanded when the cleanup runs
  CLEANUP+=('[[ -z "${OPERATOR_PID:-}" ]] || kill -TERM "$OPERATOR_PID"')
  "${K[@]}" apply -n "$APPS" -f manifests/examples/small-balanced.yaml -f manifests/examples/medium-latency.yaml >/dev/null
  # until SECONDS COMMAND...: retries COMMAND once a second.
  until_ok() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
      [[ $SECONDS -lt $deadline ]] || return 1
      sleep 1
    done
  }
  has_status() { [[ -n "$("${K[@]}" get sbc -n "$APPS" "$1" -o jsonpath='{.status.observedGeneration}')" ]]; }
  has_event() {
    "${K[@]}" get events.events.k8s.io -n "$APPS" -o jsonpath='{range .items[*]}{.regarding.name}/{.reason}{"\n"}{end}' |
      grep -qx "$1/Created"
  }
  holds_lease() {
    [[ "$("${K[@]}" get lease -n "$OP_NS" "$SA" -o jsonpath='{.spec.holderIdentity}')" == rbac-test ]]
  }
  pdb_gone() { ! "${K[@]}" get pdb -n "$APPS" medium-latency >/dev/null 2>&1; }
  if until_ok 30 holds_lease; then ok "operator holds its Lease"; else bad "operator holds its Lease"; sed "s/^/  operator: /" "$WORK/operator.log" | tail -20; fi
  for bc in small-balanced medium-latency; do
    objs=("statefulset/$bc" "service/$bc" "service/$bc-headless" "configmap/$bc-config" "serviceaccount/$bc-broker"
          "configmap/$bc-members" "role/$bc-broker" "rolebinding/$bc-broker" "secret/$bc-tls")
    [[ $bc == medium-latency ]] && objs+=("poddisruptionbudget/$bc")
    if until_ok 60 "${K[@]}" get -n "$APPS" "${objs[@]}"; then
      ok "operator created every child of $bc"
    else
      bad "operator created every child of $bc"; "${K[@]}" get -n "$APPS" "${objs[@]}" 2>&1 | tail -n 5
      "${K[@]}" get sbc -n "$APPS" "$bc" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' 2>&1 || true
    fi
    if until_ok 30 has_status "$bc"; then ok "operator wrote the status of $bc"; else bad "operator wrote the status of $bc"; fi
    if until_ok 30 has_event "$bc"; then ok "operator recorded a Created event for $bc"; else bad "operator recorded a Created event for $bc"; fi
  done
  # The operator understood the chart's tier overrides: the small tier's CPU request and
  # memory limit, and the medium tier's replicas, come from them.
  sized=$("${K[@]}" get statefulset -n "$APPS" small-balanced \
    -o jsonpath='{.spec.template.spec.containers[0].resources.requests.cpu}/{.spec.template.spec.containers[0].resources.limits.memory}' 2>&1 || true)
  replicas=$("${K[@]}" get statefulset -n "$APPS" medium-latency -o jsonpath='{.spec.replicas}' 2>&1 || true)
  if [[ "$sized $replicas" == "50m/192Mi 2" ]]; then
    ok "operator sizes tiers from the chart's tier overrides"
  else
    bad "operator sizes tiers from the chart's tier overrides: small $sized (want 50m/192Mi), medium replicas $replicas (want 2)"
    tail -n 5 "$WORK/operator.log"
  fi
  "${K[@]}" patch bc -n "$APPS" medium-latency --type merge -p '{"spec":{"replicas":1}}' >/dev/null
  # Members drop to one at once; the StatefulSet (and with it the PDB) follows after the
  # hand-off grace (15 s by default).
  members_one() {
    [[ "$("${K[@]}" get configmap -n "$APPS" medium-latency-members -o jsonpath='{.data.members}' | grep -c .)" == 1 ]]
  }
  if until_ok 30 members_one; then ok "operator lowered the members first on scale-down"; else bad "operator lowered the members first on scale-down"; fi
  if until_ok 60 pdb_gone; then ok "operator deleted the PDB on scale-down to one broker"; else bad "operator deleted the PDB on scale-down"; fi
  if grep -qi 'forbidden' "$WORK/operator.log"; then
    bad "operator log has no Forbidden:"; grep -i -m 5 'forbidden' "$WORK/operator.log" | cut -c1-400
  else
    ok "operator log has no Forbidden"
  fi
  kill -TERM "$OPERATOR_PID" 2>/dev/null || true
  wait "$OPERATOR_PID" 2>/dev/null || true
  OPERATOR_PID=""
  "${K[@]}" delete bc -n "$APPS" --all --wait=false >/dev/null 2>&1 || true
fi

echo "charts: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
