{{/* Labels shared by every object; no chart version, so the plain manifests do not churn. */}}
{{- define "azure-ccm.labels" -}}
app.kubernetes.io/part-of: azure-ccm
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* image REPO TAG [DIGEST]: the tag defaults to the chart's appVersion; a digest pins it. */}}
{{- define "azure-ccm.image" -}}
{{- $tag := .image.tag | default .default -}}
{{- if .image.digest -}}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end }}

{{- define "azure-ccm.ccm.selector" -}}
app.kubernetes.io/name: azure-cloud-controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "azure-ccm.nodeManager.selector" -}}
app.kubernetes.io/name: azure-cloud-node-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
