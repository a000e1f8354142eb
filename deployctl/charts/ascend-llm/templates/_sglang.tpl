{{- /* Helpers of the SGLang templates (engine: sglang). */ -}}

{{/* An HTTP GET probe of an SGLang server or router. Call with (dict "path" "/health" "port" 30000 "probe" $p).
Which path where (templates/sglang-statefulset.yaml):
- startup and readiness: /health. From SGLang 0.5 it answers 503 until the server's warm-up request is done
  ("The server is fired up and ready to roll!"), then runs a one-token generation through tokenizer, scheduler
  and detokenizer (a busy server answers 200 as soon as any output arrives; it gives up with 503 after
  SGLANG_HEALTH_CHECK_TIMEOUT, 20 s). A P/D prefill or decode server runs it without its peer (a fake bootstrap
  host). So Ready means "generates tokens", what the Service and the router need.
- liveness (off by default): /v1/models, answered by the HTTP server alone, with no generation. A liveness probe
  that generates would restart a server that is only saturated, and a restarted rank cannot rejoin its world.
  An HTTP route still proves the server's event loop answers, which a TCP probe does not (the kernel accepts
  connections on the listening socket even while the loop is stuck). */}}
{{- define "sglang.httpProbe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
  scheme: HTTP
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end }}

{{/* What chart.serverPod needs of SGLang. Call with the root context. */}}
{{- define "sglang.server" -}}
{{- toJson (dict "container" "sglang" "launcher" .Values.sglang.launcher "env" "" "probe" "sglang.probe") }}
{{- end }}

{{/* A probe of an SGLang server (chart.serverPod): /health to start and be ready, /v1/models to live (above). */}}
{{- define "sglang.probe" -}}
{{- include "sglang.httpProbe" (dict "path" (ternary "/v1/models" "/health" (eq .which "liveness")) "port" .port "probe" .probe) }}
{{- end }}

{{/* The pod template of one rank role of an instance (templates/lws.yaml, inferserviceset.yaml): node rank 0's (.leader) or the other ranks'. */}}
{{- define "sglang.pod" -}}
{{- $e := include "sglang.server" .root | fromJson }}
{{- include "chart.serverPod" (dict "root" .root "inst" .inst "k" 0 "workers" (not .leader) "engine" $e
                                   "templateHash" .templateHash) }}
{{- end }}
