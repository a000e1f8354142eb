{{- /*
The pod template of an engine whose every server runs its own launch with its own files (vLLM-Ascend, SGLang):
server k's files and env come from ConfigMaps <instance>-<k>-files / -env, its pod is pinned to its node.
Call with (dict "root" $ "inst" $inst "k" K "engine" E), E the engine's (dict "container" NAME "launcher" CMD
"env" YAML "probe" TEMPLATE "sum" DICT); .engine.probe is a template called with (dict "root" $ "which" "startup|readiness|liveness"
"port" P "probe" $p).

With "workers" true instead of "k" (a LeaderWorkerSet's worker template, templates/lws.yaml): one template for
servers 1..N-1 of the instance. Each such pod mounts every worker's ConfigMaps under
/opt/deployctl/servers/<k>/{files,env} and runs files/pick-server.sh, which starts the server of the node the
pod runs on (the map <instance>-nodes: node -> k; LWS_WORKER_INDEX when the instance names no nodes), so a
server's files stay the bare-metal ones whichever worker index lands on its node.
*/ -}}
{{- define "chart.serverPod" -}}
{{- $ := .root }}
{{- $inst := .inst }}
{{- $e := .engine }}
{{- $name := include "chart.instanceName" (dict "root" $ "inst" $inst) }}
{{- $checksum := include "chart.serverChecksum" (dict "root" $ "inst" $inst "engine" $e) }}
{{- $workers := list }}
{{- $nodes := list }}
{{- $k := 0 }}
{{- $pod := dict }}
{{- if .workers }}
{{- range $i, $p := $inst.pods }}{{- if gt $i 0 }}{{- $workers = append $workers $i }}{{- $nodes = append $nodes $p.node }}{{- end }}{{- end }}
{{- $pod = index $inst.pods 1 }}
{{- $ports := $pod.ports }}
{{- range $i := $workers }}{{- if ne (toJson (index $inst.pods $i).ports) (toJson $ports) }}{{- $pod = dict }}{{- end }}{{- end }}
{{- else }}
{{- $k = .k }}
{{- $pod = index $inst.pods $k }}
{{- $nodes = list $pod.node }}
{{- end }}
{{- $rankRole := ternary "master" "worker" (and (not .workers) (eq (int $k) 0)) -}}
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
    {{- if not .workers }}
    deployctl.io/server: {{ $k | quote }}
    {{- end }}
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
  {{- include "chart.enginePodSpec" (dict "root" $ "nodes" (compact $nodes) "inst" $inst) | nindent 2 }}
  containers:
    - name: {{ $e.container }}
      image: {{ include "chart.image" $ | quote }}
      imagePullPolicy: {{ $.Values.image.pullPolicy }}
      {{- if .workers }}
      command: ["/bin/bash", "/opt/deployctl/pick-server.sh", {{ $e.launcher | quote }}]
      {{- else }}
      command: ["/bin/bash", "-c", {{ $e.launcher | quote }}]
      {{- end }}
      securityContext:
        {{- include "chart.engineSecurity" $ | nindent 8 }}
      {{- if or (not .workers) $.Values.secretEnv.keys $.Values.secretEnv.existingSecret }}
      envFrom:
        {{- if not .workers }}
        - configMapRef:
            name: {{ $name }}-{{ $k }}-env
        {{- end }}
        {{- if or $.Values.secretEnv.keys $.Values.secretEnv.existingSecret }}
        - secretRef:
            name: {{ include "chart.secretEnvName" $ }}
        {{- end }}
      {{- end }}
      env:
        - name: DEPLOYCTL_WORK
          value: /opt/deployctl/files
        {{- if .workers }}
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        {{- end }}
        {{- with $e.env }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with $pod.ports }}
      ports:
        {{- range $i, $port := . }}
        - name: api-{{ $i }}
          containerPort: {{ $port }}
        {{- end }}
      {{- range $which := list "startup" "readiness" "liveness" }}
      {{- $p := get $.Values.probes $which }}
      {{- if $p.enabled }}
      {{ $which }}Probe:
        {{- include $e.probe (dict "root" $ "which" $which "port" (first $pod.ports) "probe" $p) | nindent 8 }}
      {{- end }}
      {{- end }}
      {{- end }}
      resources:
        {{- include "chart.engineResources" $ | nindent 8 }}
      volumeMounts:
        {{- if .workers }}
        - name: pick-server
          mountPath: /opt/deployctl/pick-server.sh
          subPath: pick-server.sh
          readOnly: true
        - name: nodes
          mountPath: /opt/deployctl/servers/nodes
          readOnly: true
        {{- range $i := $workers }}
        - name: files-{{ $i }}
          mountPath: /opt/deployctl/servers/{{ $i }}/files
          readOnly: true
        - name: env-{{ $i }}
          mountPath: /opt/deployctl/servers/{{ $i }}/env
          readOnly: true
        {{- end }}
        {{- else }}
        - name: files
          mountPath: /opt/deployctl/files
          readOnly: true
        {{- end }}
        {{- include "chart.engineMounts" $ | nindent 8 }}
  volumes:
    {{- if .workers }}
    - name: pick-server
      configMap:
        name: {{ include "chart.fullname" $ }}-pick-server
        defaultMode: 0555
    - name: nodes
      configMap:
        name: {{ $name }}-nodes
        defaultMode: 0444
    {{- range $i := $workers }}
    - name: files-{{ $i }}
      configMap:
        name: {{ $name }}-{{ $i }}-files
        defaultMode: 0640
    - name: env-{{ $i }}
      configMap:
        name: {{ $name }}-{{ $i }}-env
        defaultMode: 0640
    {{- end }}
    {{- else }}
    - name: files
      configMap:
        name: {{ $name }}-{{ $k }}-files
        defaultMode: 0640
    {{- end }}
    {{- include "chart.engineVolumes" $ | nindent 4 }}
{{- end }}

{{/* The checksum every pod of a per-server engine's instance carries (checksum/instance): its servers' files
and env, the launcher, the engine's other inputs of a pod (.engine.sum) and the secret env, so that a change
to any of them replaces the instance's pods together. Call with (dict "root" $ "inst" $inst "engine" $e). */}}
{{- define "chart.serverChecksum" -}}
{{- $ := .root }}
{{- $sum := merge (dict "pods" .inst.pods "launcher" .engine.launcher) (.engine.sum | default dict) }}
{{- if $.Values.secretEnv.keys }}{{- $_ := set $sum "secretEnv" $.Values.secretEnv }}{{- end }}
{{- toJson $sum | sha256sum }}
{{- end }}
