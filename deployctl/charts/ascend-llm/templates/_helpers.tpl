{{/*
Helpers of every engine's templates. Names. Resource names stay short enough for StatefulSet pods (controller-revision-hash labels are
<statefulset>-<10 chars>, at most 63): fullname <= 32, instance <= 12, "-worker".
*/}}
{{- define "chart.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 32 | trimSuffix "-" }}
{{- end }}

{{- define "chart.fullname" -}}
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

{{- define "chart.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "chart.selectorLabels" -}}
app.kubernetes.io/name: {{ include "chart.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "chart.labels" -}}
helm.sh/chart: {{ include "chart.chart" . }}
{{ include "chart.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "chart.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "chart.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "chart.image" -}}
{{- if hasPrefix "@" .Values.image.tag }}
{{- printf "%s%s" .Values.image.repository .Values.image.tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end }}
{{- end }}

{{/* An instance's resource prefix: <fullname>-<instance>. Call with (dict "root" $ "inst" $inst). */}}
{{- define "chart.instanceName" -}}
{{- printf "%s-%s" (include "chart.fullname" .root) .inst.name }}
{{- end }}

{{/* The PodGroup of an instance (gang: templates/podgroup.yaml), named with its size: the Kubernetes PodGroup's
policy cannot change, so an instance resized gets a new one (and its pods, whose template names it, restart).
Call with (dict "root" $ "inst" $inst). */}}
{{- define "chart.podGroupName" -}}
{{- printf "%s-gang%d" (include "chart.instanceName" .) (int .inst.servers) }}
{{- end }}

{{/* MindCluster's labels on an engine pod (mindcluster; '' / 0: left out). */}}
{{- define "chart.mindclusterLabels" -}}
{{- with .Values.mindcluster.faultScheduling }}
fault-scheduling: {{ . | quote }}
{{- end }}
{{- with .Values.mindcluster.faultRetryTimes }}
fault-retry-times: {{ . | quote }}
{{- end }}
{{- end }}

{{/* An engine pod's gang and MindCluster annotations. Call with (dict "root" $ "inst" $inst). */}}
{{- define "chart.gangAnnotations" -}}
{{- if eq .root.Values.gang.api "volcano" }}
scheduling.k8s.io/group-name: {{ include "chart.podGroupName" . }}
{{- end }}
{{- with .root.Values.mindcluster.schedulePolicy }}
huawei.com/schedule_policy: {{ . | quote }}
{{- end }}
{{- end }}

{{/* Resource quantities are strings ("8"): clients validate them as such. */}}
{{- define "chart.quantities" -}}
{{- range $k, $v := . }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{/* requests or limits of an engine pod: the whole server's NPUs plus resources.<which>. */}}
{{- define "chart.engineQuantities" -}}
{{- $npu := dict .root.Values.npu.resource (toString .root.Values.npu.perPod) }}
{{- include "chart.quantities" (merge $npu (get .root.Values.resources .which)) | trim }}
{{- end }}

{{/* The pod spec of an engine pod up to its containers: host network (HCCL and the engines address servers by
IP), no API token, scheduling, pinned to .nodes (none: anywhere), one engine pod per server (each takes every
NPU and the host ports). Call with (dict "root" $ "nodes" $nodes). */}}
{{- define "chart.enginePodSpec" -}}
{{- $ := .root -}}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
automountServiceAccountToken: false
enableServiceLinks: false
serviceAccountName: {{ include "chart.serviceAccountName" $ }}
terminationGracePeriodSeconds: 30
{{- if $.Values.schedulerName }}
schedulerName: {{ $.Values.schedulerName }}
{{- else if eq $.Values.gang.api "volcano" }}
schedulerName: volcano
{{- end }}
{{- if and .inst (eq $.Values.gang.api "kubernetes") }}
schedulingGroup:
  podGroupName: {{ include "chart.podGroupName" (dict "root" $ "inst" .inst) }}
{{- end }}
{{- with $.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
nodeSelector:
  accelerator-type: {{ $.Values.npu.acceleratorType }}
  {{- with $.Values.nodeSelector }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
affinity:
  {{- if .nodes }}
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: {{ $.Values.nodeLabel }}
              operator: In
              values:
                {{- toYaml .nodes | nindent 16 }}
  {{- end }}
  podAntiAffinity:
    # one engine pod per server: each takes every NPU and the host ports
    requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels:
            {{- include "chart.selectorLabels" $ | nindent 12 }}
            app.kubernetes.io/component: engine
        topologyKey: kubernetes.io/hostname
{{- with $.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The engine container's securityContext: privileged, or .Values.securityContext. */}}
{{- define "chart.engineSecurity" -}}
{{- if .Values.privileged }}
privileged: true
{{- else }}
{{- toYaml .Values.securityContext }}
{{- end }}
{{- end }}

{{/* The engine container's resources: the whole server's NPUs plus .Values.resources. */}}
{{- define "chart.engineResources" -}}
requests:
  {{- include "chart.engineQuantities" (dict "root" . "which" "requests") | nindent 2 }}
limits:
  {{- include "chart.engineQuantities" (dict "root" . "which" "limits") | nindent 2 }}
{{- end }}

{{/* Mounts of every engine container: /dev/shm, the weights (read-only) and the host paths (read-only). */}}
{{- define "chart.engineMounts" -}}
- name: dshm
  mountPath: /dev/shm
- name: weights
  mountPath: {{ .Values.weightsPath }}
  readOnly: true
{{- range .Values.hostMounts }}
- name: host-{{ .name }}
  mountPath: {{ .path }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The volumes behind chart.engineMounts. */}}
{{- define "chart.engineVolumes" -}}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ .Values.shmSize }}
- name: weights
  hostPath:
    path: {{ .Values.weightsPath }}
    type: Directory
{{- range .Values.hostMounts }}
- name: host-{{ .name }}
  hostPath:
    path: {{ .path }}
    {{- with .type }}
    type: {{ . }}
    {{- end }}
{{- end }}
{{- end }}

{{/* The client endpoint's scheme: https only for MindIE with tls. */}}
{{- define "chart.scheme" -}}
{{- ternary "https" "http" (and (eq .Values.engine "mindie") .Values.mindie.tls) }}
{{- end }}

{{/* The same for a curl command line (-k: MindIE's certificates are the cluster's own). */}}
{{- define "chart.curlScheme" -}}
{{- ternary "-k https" "http" (and (eq .Values.engine "mindie") .Values.mindie.tls) }}
{{- end }}

{{/* The Secret holding the secret env variables (engine.env keys that look secret or engine.secret_env):
secretEnv.existingSecret when set (you manage it), else <fullname>-secret-env, created from secretEnv.values. */}}
{{- define "chart.secretEnvName" -}}
{{- if .Values.secretEnv.existingSecret }}{{ .Values.secretEnv.existingSecret }}{{ else }}{{ include "chart.fullname" . }}-secret-env{{ end }}
{{- end }}

