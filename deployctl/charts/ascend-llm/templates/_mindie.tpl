{{- /* Helpers of the MindIE templates (engine: mindie). */ -}}
{{/* A health probe on MindIE's management port: httpGet, or tcpSocket with TLS (MindIE asks HTTPS clients
for a certificate the kubelet does not have). Call with (dict "root" $ "path" "/v2/health/ready" "probe" $p
"port" N); the port is the server's management port (a distributed decode pod: its DP rank 0's). */}}
{{- define "mindie.healthProbe" -}}
{{- $port := .port | default .root.Values.mindie.ports.management }}
{{- if .root.Values.mindie.tls }}
tcpSocket:
  port: {{ $port }}
{{- else }}
httpGet:
  path: {{ .path }}
  port: {{ $port }}
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

{{/* The pod template of a MindIE server: the instance's master (rank table's first server) or one of its workers,
the same for every worker (templates/mindie-statefulset.yaml, and as every engine's <engine>.pod: lws.yaml,
inferserviceset.yaml). Call with (dict "root" $ "inst" $inst "rankRole" "master|worker") or (... "leader" bool). */}}
{{- define "mindie.pod" -}}
{{- $ := .root }}
{{- $inst := .inst }}
{{- $rankRole := .rankRole | default (ternary "master" "worker" (default false .leader)) }}
{{- $name := include "chart.instanceName" (dict "root" $ "inst" $inst) }}
{{- $checksum := include "mindie.checksum" (dict "root" $ "inst" $inst) }}
{{- /* pd-split decode (distributed DP): one server per DP rank of the pod, config1..N.json, ports from distBase */}}
{{- $dp := hasKey $inst.env "DEPLOYCTL_DP_SERVERS" }}
{{- $mgmt := ternary (add $.Values.mindie.ports.distBase 1) $.Values.mindie.ports.management $dp }}
{{- $nodes := list }}
{{- if $inst.nodes }}
{{- $nodes = ternary (list (first $inst.nodes)) (rest $inst.nodes) (eq $rankRole "master") }}
{{- end -}}
metadata:
  labels:
    {{- include "chart.selectorLabels" $ | nindent 4 }}
    {{- with $.Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with include "chart.mindclusterLabels" $ }}
    {{- . | nindent 4 }}
    {{- end }}
    app.kubernetes.io/component: engine
    deployctl.io/instance: {{ $inst.name }}
    deployctl.io/role: {{ $inst.role }}
    deployctl.io/rank-role: {{ $rankRole }}
    ring-controller.atlas: {{ $.Values.npu.ringController }}
  annotations:
    checksum/instance: {{ $checksum }}
    {{- with .templateHash }}
    deployctl.io/pod-template: {{ . }}
    {{- end }}
    {{- with include "chart.gangAnnotations" (dict "root" $ "inst" $inst) }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with $.Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- include "chart.enginePodSpec" (dict "root" $ "nodes" $nodes "inst" $inst) | nindent 2 }}
  containers:
    - name: mindie
      image: {{ include "chart.image" $ | quote }}
      imagePullPolicy: {{ $.Values.image.pullPolicy }}
      command: ["/bin/bash", "/opt/deployctl/boot.sh", "server"]
      securityContext:
        {{- include "chart.engineSecurity" $ | nindent 8 }}
      envFrom:
        - configMapRef:
            name: {{ $name }}-env
        {{- if or $.Values.secretEnv.keys $.Values.secretEnv.existingSecret }}
        - secretRef:
            name: {{ include "chart.secretEnvName" $ }}
        {{- end }}
      env:
        {{- include "mindie.podEnv" $ | nindent 8 }}
        - name: DEPLOYCTL_DAEMON
          value: {{ $.Values.mindie.daemon | quote }}
        - name: DEPLOYCTL_LAUNCHER
          value: {{ ternary $.Values.mindie.launchers.dpServer $.Values.mindie.launchers.server $dp | quote }}
        {{- if $dp }}
        - name: DEPLOYCTL_WORK
          value: {{ $.Values.workDir | quote }}
        {{- end }}
        - name: DEPLOYCTL_RANK_TABLE_SOURCE
          value: {{ $.Values.mindie.rankTable.source | quote }}
        - name: DEPLOYCTL_RANK_TABLE_WAIT
          value: {{ $.Values.mindie.rankTable.waitSeconds | quote }}
      ports:
        {{- if $dp }}
        {{- /* DP rank 0 of the pod (Motor RankTableLoader.cpp L128-136: base + 4r .. +3) */}}
        - name: http
          containerPort: {{ $.Values.mindie.ports.distBase }}
        - name: management
          containerPort: {{ $mgmt }}
        - name: metrics
          containerPort: {{ add $.Values.mindie.ports.distBase 2 }}
        - name: inter-comm
          containerPort: {{ add $.Values.mindie.ports.distBase 3 }}
        {{- else }}
        - name: http
          containerPort: {{ $.Values.mindie.ports.http }}
        - name: management
          containerPort: {{ $.Values.mindie.ports.management }}
        - name: metrics
          containerPort: {{ $.Values.mindie.ports.metrics }}
        - name: inter-comm
          containerPort: {{ $.Values.mindie.ports.interComm }}
        - name: multi-node
          containerPort: {{ $.Values.mindie.ports.multiNode }}
        {{- end }}
      {{- if $.Values.probes.startup.enabled }}
      startupProbe:
        {{- include "mindie.healthProbe" (dict "root" $ "path" "/v2/health/live" "probe" $.Values.probes.startup "port" $mgmt) | nindent 8 }}
      {{- end }}
      {{- if $.Values.probes.readiness.enabled }}
      readinessProbe:
        {{- include "mindie.healthProbe" (dict "root" $ "path" "/v2/health/ready" "probe" $.Values.probes.readiness "port" $mgmt) | nindent 8 }}
      {{- end }}
      {{- if $.Values.probes.liveness.enabled }}
      livenessProbe:
        {{- include "mindie.healthProbe" (dict "root" $ "path" "/v2/health/live" "probe" $.Values.probes.liveness "port" $mgmt) | nindent 8 }}
      {{- end }}
      resources:
        {{- include "chart.engineResources" $ | nindent 8 }}
      volumeMounts:
        - name: boot
          mountPath: /opt/deployctl/boot.sh
          subPath: boot.sh
          readOnly: true
        - name: files
          mountPath: /opt/deployctl/files
          readOnly: true
        - name: work
          mountPath: {{ $.Values.workDir }}
        {{- include "chart.engineMounts" $ | nindent 8 }}
        {{- if eq $.Values.mindie.rankTable.source "cluster" }}
        - name: hccl
          mountPath: /user/serverid/devindex/config
          readOnly: true
        {{- end }}
  volumes:
    - name: boot
      configMap:
        name: {{ include "chart.fullname" $ }}-boot
        defaultMode: 0555
    - name: files
      configMap:
        name: {{ $name }}-files
        defaultMode: 0640
    - name: work
      emptyDir: {}
    {{- include "chart.engineVolumes" $ | nindent 4 }}
    {{- if eq $.Values.mindie.rankTable.source "cluster" }}
    - name: hccl
      configMap:
        # written by the cluster's rank-table generator; the pod waits in boot.sh until it is complete
        name: {{ $.Values.mindie.rankTable.configMapPrefix }}{{ $name }}
        defaultMode: 0640
        optional: true
    {{- end }}
{{- end }}

{{/* The checksum every pod of a MindIE instance carries: its files, env, boot script and the secret env. Call with
(dict "root" $ "inst" $inst). */}}
{{- define "mindie.checksum" -}}
{{- $sum := dict "files" .inst.files "env" .inst.env "boot" (.root.Files.Get "files/mindie-boot.sh") }}
{{- if .root.Values.secretEnv.keys }}{{- $_ := set $sum "secretEnv" .root.Values.secretEnv }}{{- end }}
{{- toJson $sum | sha256sum }}
{{- end }}
