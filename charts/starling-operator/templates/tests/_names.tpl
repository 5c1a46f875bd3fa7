{{/*
Names of the `helm test` hook's objects (templates/tests/): where it runs, the BrokerCluster
it checks, its BrokerUser and that user's credentials Secret.
*/}}

{{/*
The namespace of the hook's objects (a BrokerUser lives in its cluster's namespace): tests.namespace,
else the first of watchNamespaces (the operator manages nothing elsewhere), else the release's.
*/}}
{{- define "starling-operator.tests.namespace" -}}
{{- if .Values.tests.namespace -}}
{{- if and .Values.watchNamespaces (not (has .Values.tests.namespace .Values.watchNamespaces)) -}}
{{- fail (printf "tests.namespace %s is not one of watchNamespaces (%s): the operator would never reconcile the test's BrokerUser." .Values.tests.namespace (join ", " .Values.watchNamespaces)) -}}
{{- end -}}
{{- .Values.tests.namespace -}}
{{- else if .Values.watchNamespaces -}}
{{- first .Values.watchNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The hook's own objects: <fullname>-test, cut so that the cluster's children's names fit. */}}
{{- define "starling-operator.tests.name" -}}
{{- printf "%s-test" (include "starling-operator.fullname" . | trunc 40 | trimSuffix "-") -}}
{{- end -}}

{{/* The BrokerCluster checked: tests.brokerCluster, else the throwaway one the hook creates. */}}
{{- define "starling-operator.tests.cluster" -}}
{{- default (include "starling-operator.tests.name" .) .Values.tests.brokerCluster -}}
{{- end -}}

{{/* The user's credentials Secret, new per revision so that a Secret of an earlier run that the
garbage collector has not removed yet is never taken for this run's. */}}
{{- define "starling-operator.tests.secret" -}}
{{- printf "%s-r%d" (include "starling-operator.tests.name" .) (int .Release.Revision) -}}
{{- end -}}

{{/* The test pod's image: tests.image, else the broker image (which holds the `starling` CLI). */}}
{{- define "starling-operator.tests.image" -}}
{{- if .Values.tests.image.repository -}}
{{- printf "%s:%s" .Values.tests.image.repository (default .Chart.AppVersion .Values.tests.image.tag) -}}
{{- else -}}
{{- include "starling-operator.brokerImage" . -}}
{{- end -}}
{{- end -}}

{{/*
Labels of the hook's objects. Not the operator's app.kubernetes.io/name: the Deployment's
selector, the metrics Service and the brokers' NetworkPolicy (which admits the operator's pods
to the brokers' HTTP port) must never take the test pod for an operator pod.
*/}}
{{- define "starling-operator.tests.labels" -}}
app.kubernetes.io/name: starling-helm-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: helm-test
app.kubernetes.io/part-of: starling
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}
