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
