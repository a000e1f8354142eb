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
