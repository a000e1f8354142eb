{{/*
Names. Resource names stay short enough for StatefulSet pods (controller-revision-hash labels are
<statefulset>-<10 chars>, at most 63): fullname <= 32, instance <= 12, "-worker".
*/}}
{{- define "mindie.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 32 | trimSuffix "-" }}
{{- end }}

{{- define "mindie.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 32 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 32 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 32 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mindie.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mindie.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mindie.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mindie.labels" -}}
helm.sh/chart: {{ include "mindie.chart" . }}
{{ include "mindie.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mindie.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mindie.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mindie.image" -}}
{{- if hasPrefix "@" .Values.image.tag }}
{{- printf "%s%s" .Values.image.repository .Values.image.tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end }}
{{- end }}

{{/* An instance's resource prefix: <fullname>-<instance>. Call with (dict "root" $ "inst" $inst). */}}
{{- define "mindie.instanceName" -}}
{{- printf "%s-%s" (include "mindie.fullname" .root) .inst.name }}
{{- end }}

{{/* A health probe on MindIE's management port: httpGet, or tcpSocket with TLS (MindIE asks HTTPS clients
for a certificate the kubelet does not have). Call with (dict "root" $ "path" "/v2/health/ready" "probe" $p). */}}
{{- define "mindie.healthProbe" -}}
{{- if .root.Values.tls }}
tcpSocket:
  port: {{ .root.Values.ports.management }}
{{- else }}
httpGet:
  path: {{ .path }}
  port: {{ .root.Values.ports.management }}
  scheme: HTTP
{{- end }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end }}

{{/* The env every pod gets from the downward API: under hostNetwork the pod IP is the server IP. */}}
{{- define "mindie.podEnv" -}}
- name: MIES_CONTAINER_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: MIES_CONTAINER_MANAGEMENT_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: HOST_IP
  valueFrom:
    fieldRef:
      fieldPath: status.hostIP
- name: DEPLOYCTL_WORK_DIR
  value: {{ .Values.workDir | quote }}
{{- end }}

{{/* Resource quantities are strings ("8"): clients validate them as such. */}}
{{- define "mindie.quantities" -}}
{{- range $k, $v := . }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{/* requests or limits of an engine pod: the whole server's NPUs plus resources.<which>. */}}
{{- define "mindie.engineQuantities" -}}
{{- $npu := dict .root.Values.npu.resource (toString .root.Values.npu.perPod) }}
{{- include "mindie.quantities" (merge $npu (get .root.Values.resources .which)) | trim }}
{{- end }}
