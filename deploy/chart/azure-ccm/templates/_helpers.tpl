{{/* Labels shared by every object; no chart version, so the plain manifests do not churn. */}}
{{- define "azure-ccm.labels" -}}
app.kubernetes.io/part-of: azure-ccm
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* image REPO TAG: the tag defaults to the chart's appVersion. */}}
{{- define "azure-ccm.image" -}}
{{- $tag := .image.tag | default .default -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end }}

{{- define "azure-ccm.ccm.selector" -}}
app.kubernetes.io/name: azure-cloud-controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "azure-ccm.nodeManager.selector" -}}
app.kubernetes.io/name: azure-cloud-node-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
