{{- /* Helpers of the vLLM-Ascend templates (engine: vllm-ascend). */ -}}

{{/* vLLM's /health on an API port (vllm/entrypoints/openai/api_server.py: 200 once the engine runs). Call with
(dict "port" 8000 "probe" $p). */}}
{{- define "vllm.healthProbe" -}}
httpGet:
  path: /health
  port: {{ .port }}
  scheme: HTTP
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end }}

{{/* What chart.serverPod needs of vLLM-Ascend. Call with the root context. */}}
{{- define "vllm.server" -}}
{{- $env := "" }}
{{- if .Values.vllm.mooncake }}
{{- $env = "- name: DEPLOYCTL_MOONCAKE\n  value: \"1\"" }}
{{- end }}
{{- toJson (dict "container" "vllm" "launcher" .Values.vllm.launcher "env" $env "probe" "vllm.probe"
                 "sum" (dict "mooncake" .Values.vllm.mooncake)) }}
{{- end }}

{{/* A probe of a vLLM-Ascend server: /health on its first API port (chart.serverPod). */}}
{{- define "vllm.probe" -}}
{{- include "vllm.healthProbe" (dict "port" .port "probe" .probe) }}
{{- end }}

{{/* The pod template of one rank role of an instance (templates/lws.yaml, inferserviceset.yaml): the master server's (.leader) or the workers'. */}}
{{- define "vllm-ascend.pod" -}}
{{- $e := include "vllm.server" .root | fromJson }}
{{- include "chart.serverPod" (dict "root" .root "inst" .inst "k" 0 "workers" (not .leader) "engine" $e
                                   "templateHash" .templateHash) }}
{{- end }}
