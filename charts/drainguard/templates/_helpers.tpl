{{/* Labels on every object's metadata: kustomize's part-of, plus helm's own. */}}
{{- define "drainguard.labels" -}}
app.kubernetes.io/part-of: drainguard
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The webhook's selector labels (fixed: the Service, PDB, NetworkPolicy and anti-affinity select them). */}}
{{- define "drainguard.webhookSelector" -}}
app.kubernetes.io/name: drainguard
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "drainguard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* MetalLB speaker service accounts as RBAC subjects. */}}
{{- define "drainguard.speakerSubjects" -}}
{{- range .Values.metallb.speakerServiceAccounts }}
  - kind: ServiceAccount
    name: {{ . }}
    namespace: {{ $.Values.metallb.namespace }}
{{- end }}
{{- end -}}

{{/* The webhook's service account as an RBAC subject. */}}
{{- define "drainguard.webhookSubject" -}}
subjects:
  - kind: ServiceAccount
    name: drainguard-webhook
    namespace: {{ .Release.Namespace }}
{{- end -}}


{{/* The standalone netfilter cleanup's objects (as its kustomize overlay labels them). */}}
{{- define "drainguard.netfilterLabels" -}}
{{ include "drainguard.labels" . }}
app.kubernetes.io/name: drainguard
app.kubernetes.io/component: netfilter-cleanup
{{- end -}}
