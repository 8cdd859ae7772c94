{{/* The labels of every object the chart makes: the install manifest's, and helm's. */}}
{{- define "butler-operator.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/name: butler-operator
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{/* The labels of the operator's pods, as the install manifest has them. */}}
{{- define "butler-operator.podLabels" -}}
app.kubernetes.io/name: butler-operator
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "butler-operator.image" -}}
{{- $image := .Values.image.manager -}}
{{ $image.repository }}:{{ $image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
The providers the values declare, as a YAML list of {key, kind, name, namespace,
createNamespace}, in the order of the kinds and then of their names; `enabled: false` leaves one
out. As cluster-api-operator's chart does, a release that declares providers but no core gets
the core `cluster-api` in capi-system, and one with infrastructure but no bootstrap or control
plane gets kubeadm's, in capi-kubeadm-bootstrap-system and capi-kubeadm-control-plane-system;
when every declared provider is one of Butler's, the core is Butler's (`butler`, butler-system).
*/}}
{{- define "butler-operator.providers" -}}
{{- $out := list }}
{{- range $k := include "butler-operator.kinds" . | fromYamlArray }}
{{- $key := index $k 0 }}
{{- range $name, $p := index $.Values $key | default dict }}
{{- $p = $p | default dict }}
{{- if ne (toString $p.enabled) "false" }}
{{- $namespace := printf "%s-%s" $name (index $k 2) }}
{{- if eq $key "core" }}{{ $namespace = "capi-system" }}{{ end }}
{{- $created := ne (toString $p.createNamespace) "false" }}
{{- $out = append $out (dict "key" $key "kind" (index $k 1) "name" $name "namespace" ($p.namespace | default $namespace) "createNamespace" $created) }}
{{- end }}
{{- end }}
{{- end }}
{{- $has := dict }}
{{- range $out }}{{ $_ := set $has .key true }}{{ end }}
{{- if and $out (not $has.core) }}
{{- $butler := splitList " " (include "butler-operator.butlerProviders" .) }}
{{- $ours := true }}
{{- range $out }}{{ if not (has (printf "%s/%s" .kind .name) $butler) }}{{ $ours = false }}{{ end }}{{ end }}
{{- if $ours }}
{{- $out = prepend $out (dict "key" "core" "kind" "CoreProvider" "name" "butler" "namespace" "butler-system" "createNamespace" true) }}
{{- else }}
{{- if and $has.infrastructure (not $has.controlPlane) }}
{{- $out = prepend $out (dict "key" "controlPlane" "kind" "ControlPlaneProvider" "name" "kubeadm" "namespace" "capi-kubeadm-control-plane-system" "createNamespace" true) }}
{{- end }}
{{- if and $has.infrastructure (not $has.bootstrap) }}
{{- $out = prepend $out (dict "key" "bootstrap" "kind" "BootstrapProvider" "name" "kubeadm" "namespace" "capi-kubeadm-bootstrap-system" "createNamespace" true) }}
{{- end }}
{{- $out = prepend $out (dict "key" "core" "kind" "CoreProvider" "name" "cluster-api" "namespace" "capi-system" "createNamespace" true) }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end -}}

{{/* Whether the upstream rules are granted: asked for, or a declared provider is not Butler's. */}}
{{- define "butler-operator.upstream" -}}
{{- $asked := .Values.upstreamRBAC.enabled -}}
{{- if kindIs "bool" $asked -}}
{{- if $asked }}true{{ end -}}
{{- else -}}
{{- $butler := splitList " " (include "butler-operator.butlerProviders" .) -}}
{{- range include "butler-operator.providers" . | fromYamlArray -}}
{{- if not (has (printf "%s/%s" .kind .name) $butler) }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
