#!/usr/bin/env bash
# Checks of the chart's observability pack with Prometheus's own promtool (Debian's
# `prometheus` package, which e2e/cluster/install.sh installs). No cluster needed.
#
#   charts/promtool-check.sh        (make promtool-check)
#
#   1. promtool check rules rules/starling.rules.yaml: the alert file the PrometheusRule wraps;
#   2. promtool test rules charts/testdata/starling.rules.test.yaml: every alert fires on
#      synthetic series showing its fault, after its `for:`, and stays silent on healthy ones;
#   3. every panel query of dashboards/starling.json parses as PromQL: the queries, with the
#      dashboard's variables substituted (see below), become recording rules that promtool
#      checks. A `$name` the substitution does not know fails the check.
#
# Variable substitution (the same in e2e/tests/suite/dashboard.rs, which evaluates every query
# against a real Prometheus): $__rate_interval, $__interval and $__range become 1m; the
# dashboard's template variables become the regex `.*` here (their "All" value).
set -euo pipefail
cd "$(dirname "$0")/.."
CHART=charts/starling-operator
PROMTOOL=${PROMTOOL:-$(command -v promtool || true)}
[[ -n "$PROMTOOL" ]] || { echo "promtool not found: run e2e/cluster/install.sh (Debian's prometheus package) or set PROMTOOL" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=0
step() { # step WHAT COMMAND...
  local what=$1 out; shift
  if out=$("$@" 2>&1); then echo "ok   $what"; else FAILED=$((FAILED + 1)); echo "FAIL $what"; echo "$out"; fi
}
step "promtool check rules $CHART/rules/starling.rules.yaml" "$PROMTOOL" check rules "$CHART/rules/starling.rules.yaml"
step "promtool test rules charts/testdata/starling.rules.test.yaml" "$PROMTOOL" test rules charts/testdata/starling.rules.test.yaml
if python3 - "$CHART/dashboards/starling.json" "$WORK/dashboard.rules.yaml" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
variables = {v["name"] for v in dash["templating"]["list"]}
known = {"datasource", "namespace", "cluster", "pod", "operator_namespace"}
if variables != known:
    sys.exit(f"the dashboard's variables {sorted(variables)} are not the ones this check substitutes {sorted(known)}")
def substitute(expr):
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "1m", expr)
    expr = re.sub(r"\$(namespace|cluster|pod|operator_namespace)\b", ".*", expr)
    left = re.findall(r"\$\{?\w+", expr)
    if left:
        sys.exit(f"unknown variables {left} in {expr}")
    return expr
rules, problems = [], []
for p in dash["panels"]:
    if p["type"] == "row":
        continue
    if not p.get("targets"):
        problems.append(f"panel {p['title']!r} has no query")
    for t in p.get("targets", []):
        rules.append({"record": f"dashboard:panel_{p['id']}_{t['refId']}", "expr": substitute(t["expr"])})
for v in dash["templating"]["list"]:
    if v["type"] == "query":
        m = re.fullmatch(r"label_values\((.*), *(\w+)\)", v["query"]["query"])
        if not m:
            problems.append(f"variable {v['name']}: not label_values(SELECTOR, LABEL)")
        else:
            rules.append({"record": f"dashboard:variable_{v['name']}", "expr": substitute(m.group(1))})
if problems:
    sys.exit("\n".join(problems))
json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"), indent=1)
print(f"{len(rules)} queries")
PY
then
  step "every dashboard query parses as PromQL (promtool check rules)" "$PROMTOOL" check rules "$WORK/dashboard.rules.yaml"
else
  FAILED=$((FAILED + 1)); echo "FAIL the dashboard's queries could not be extracted"
fi
[[ $FAILED -eq 0 ]]
