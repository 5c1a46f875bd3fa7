{{/*
Names, labels and the checks that the schema cannot express.
*/}}

{{/* The release's full name: the release name when it already contains the chart name. */}}
{{- define "starling-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the operator pods (immutable once the Deployment exists). */}}
{{- define "starling-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object of the chart. */}}
{{- define "starling-operator.labels" -}}
{{ include "starling-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: starling
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "starling-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "starling-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "starling-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "starling-operator.brokerImage" -}}
{{- default (printf "starling/broker:%s" .Chart.AppVersion) .Values.brokerImage -}}
{{- end -}}

{{- define "starling-operator.leaseName" -}}
{{- default (include "starling-operator.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* Where the tier overrides file is mounted in the operator container. */}}
{{- define "starling-operator.tiersFile" -}}
/etc/starling-operator/tiers.yaml
{{- end -}}

{{/*
The tier overrides in the format of the operator's --tier-overrides file (starling-config's
TierTable): per tier, only the set fields, as replicas, cpuRequest, cpuLimit, memoryRequest,
memoryLimit and capacityMsgsPerSec, quantities as strings.
*/}}
{{- define "starling-operator.tiers" -}}
{{- $out := dict -}}
{{- range $name := list "small" "medium" "large" -}}
{{- $t := get $.Values.tiers $name | default dict -}}
{{- $o := dict -}}
{{- if hasKey $t "replicas" -}}{{- $_ := set $o "replicas" (int $t.replicas) -}}{{- end -}}
{{- if hasKey $t "capacityMsgsPerSec" -}}{{- $_ := set $o "capacityMsgsPerSec" (int64 $t.capacityMsgsPerSec) -}}{{- end -}}
{{- range $res := list "cpu" "memory" -}}
{{- $q := get $t $res | default dict -}}
{{- range $k := list "request" "limit" -}}
{{- if hasKey $q $k -}}{{- $_ := set $o (printf "%s%s" $res (title $k)) (toString (get $q $k)) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if $o -}}{{- $_ := set $out $name $o -}}{{- end -}}
{{- end -}}
{{- if $out -}}{{- toYaml $out -}}{{- else -}}{}{{- end -}}
{{- end -}}

{{/* Combinations of values that values.schema.json cannot refuse with a clear message. */}}
{{- define "starling-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicas is %d but leaderElection.enabled is false: without a Lease every replica would reconcile the same BrokerClusters. Enable leader election or set replicas to 1." (int .Values.replicas)) -}}
{{- end -}}
{{- if and .Values.monitoring.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "monitoring.serviceMonitor.enabled needs metrics.service.enabled: the ServiceMonitor selects the metrics Service." -}}
{{- end -}}
{{- end -}}

{{/* The rules of the operator in the namespaces it watches (see rbac.yaml for why each verb). */}}
{{- define "starling-operator.rules" -}}
- apiGroups: ["starling.dev"]
  resources: ["brokerclusters"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["starling.dev"]
  resources: ["brokerclusters/status"]
  verbs: ["patch"]
- apiGroups: ["starling.dev"]
  resources: ["brokerclusters/finalizers"]
  verbs: ["update"]
- apiGroups: ["starling.dev"]
  resources: ["brokerusers"]
  verbs: ["list", "watch"]
- apiGroups: ["starling.dev"]
  resources: ["brokerusers/status"]
  verbs: ["patch"]
- apiGroups: ["starling.dev"]
  resources: ["brokerusers/finalizers"]
  verbs: ["update"]
- apiGroups: ["starling.dev"]
  resources: ["brokertopics"]
  verbs: ["list", "watch"]
- apiGroups: ["starling.dev"]
  resources: ["brokertopics/status"]
  verbs: ["patch"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["services", "serviceaccounts"]
  verbs: ["list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["list"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["list", "watch", "create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["list", "watch", "create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/*
The TCP port of autoscaler.prometheusUrl: the one after the host, else the scheme's (80 for
http, 443 for https).
*/}}
{{- define "starling-operator.prometheusPort" -}}
{{- $url := urlParse .Values.autoscaler.prometheusUrl -}}
{{- if regexMatch ":[0-9]+$" $url.host -}}
{{- regexFind "[0-9]+$" $url.host -}}
{{- else if eq (lower $url.scheme) "https" -}}
443
{{- else -}}
80
{{- end -}}
{{- end -}}

{{/*
The file the operator reads Prometheus's bearer token from, or "" for none. Fails when both
sources are set.
*/}}
{{- define "starling-operator.prometheusTokenFile" -}}
{{- $t := .Values.autoscaler.prometheusBearerToken -}}
{{- if and $t.serviceAccount $t.secretName -}}
{{- fail "autoscaler.prometheusBearerToken: set serviceAccount or secretName, not both." -}}
{{- else if $t.serviceAccount -}}
/var/run/secrets/kubernetes.io/serviceaccount/token
{{- else if $t.secretName -}}
{{- printf "/etc/starling-operator/prometheus-token/%s" $t.secretKey -}}
{{- end -}}
{{- end -}}
