{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "mcpcluster.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "mcpcluster.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcpcluster.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object, without the component. */}}
{{- define "mcpcluster.commonLabels" -}}
helm.sh/chart: {{ include "mcpcluster.chart" . }}
app.kubernetes.io/name: {{ include "mcpcluster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcpcluster
{{- end }}

{{/* Labels of the node objects. */}}
{{- define "mcpcluster.labels" -}}
{{ include "mcpcluster.commonLabels" . }}
app.kubernetes.io/component: node
{{- end }}

{{/* Selector labels of the nodes. */}}
{{- define "mcpcluster.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpcluster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node
{{- end }}

{{/* Selector labels of the bundled Redis. */}}
{{- define "mcpcluster.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpcluster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "mcpcluster.redisFullname" -}}
{{- printf "%s-redis" (include "mcpcluster.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "mcpcluster.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcpcluster.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcpcluster.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Name of the Secret the chart creates (state key, Redis URL). */}}
{{- define "mcpcluster.secretName" -}}
{{- include "mcpcluster.fullname" . }}
{{- end }}

{{/* Whether the chart creates its own Secret: it holds the state key unless
an existing Secret does, and the Redis URL unless an existing Secret does. */}}
{{- define "mcpcluster.ownsStateKey" -}}
{{- if not .Values.stateKey.existingSecret }}true{{ end }}
{{- end }}
{{- define "mcpcluster.ownsRedisURL" -}}
{{- if not (and (eq .Values.redis.mode "external") .Values.redis.existingSecret) }}true{{ end }}
{{- end }}

{{/* Where the Redis password and TLS Secrets are mounted. */}}
{{- define "mcpcluster.redisPasswordDir" -}}/etc/mcpcluster/redis-password{{- end }}
{{- define "mcpcluster.redisTLSDir" -}}/etc/mcpcluster/redis-tls{{- end }}

{{/* Whether the chart's Secret holds the introspection client secret. */}}
{{- define "mcpcluster.ownsAuthSecret" -}}
{{- with .Values.auth }}{{ if and .issuer .introspection.clientID (not .introspection.existingSecret) }}true{{ end }}{{ end }}
{{- end }}

{{/* The Redis URL the nodes use when the chart's Secret holds it. */}}
{{- define "mcpcluster.redisURL" -}}
{{- if eq .Values.redis.mode "bundled" }}
{{- printf "redis://%s:6379/0" (include "mcpcluster.redisFullname" .) }}
{{- else }}
{{- .Values.redis.url }}
{{- end }}
{{- end }}

{{/*
Checks that values cannot express in values.schema.json; included by the
Deployment so that an invalid set fails to render.
*/}}
{{- define "mcpcluster.validate" -}}
{{- $s := .Values.shutdown }}
{{- $delay := $s.drainDelaySeconds | default 0 }}
{{- $need := add $s.preStopSleepSeconds $delay $s.drainTimeoutSeconds }}
{{- if le (int $s.terminationGracePeriodSeconds) (int $need) }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%d) must be greater than shutdown.preStopSleepSeconds + shutdown.drainDelaySeconds + shutdown.drainTimeoutSeconds (%d + %d + %d = %d): the kubelet would kill nodes before they finish draining" (int $s.terminationGracePeriodSeconds) (int $s.preStopSleepSeconds) (int $delay) (int $s.drainTimeoutSeconds) (int $need)) }}
{{- end }}
{{- if and (eq .Values.redis.mode "external") (not .Values.redis.url) (not .Values.redis.existingSecret) }}
{{- fail "redis.mode is external: set redis.url or redis.existingSecret" }}
{{- end }}
{{- with .Values.redis }}
{{- if and (eq .mode "bundled") (or .tls.existingSecret .passwordSecret .username) }}
{{- fail "redis.tls, redis.passwordSecret and redis.username are for an external Redis: the bundled one speaks no TLS and has no ACL users (set redis.mode external)" }}
{{- end }}
{{- if and .tls.existingSecret .url (not (regexMatch "^rediss(-sentinel|-cluster)?://" .url)) }}
{{- fail "redis.tls.existingSecret needs a TLS URL: redis.url must start with rediss://, rediss-sentinel:// or rediss-cluster://" }}
{{- end }}
{{- if and .tls.existingSecret (not .tls.caKey) (not .tls.certKey) }}
{{- fail "redis.tls.existingSecret is set but neither redis.tls.caKey nor redis.tls.certKey names a key of it" }}
{{- end }}
{{- if and .tls.serverName (eq .mode "bundled") }}
{{- fail "redis.tls.serverName is for an external TLS Redis" }}
{{- end }}
{{- end }}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) }}
{{- fail "httpRoute.enabled needs httpRoute.parentRefs (the Gateway to attach to)" }}
{{- end }}
{{- if eq (int .Values.metricsPort) (int .Values.containerPort) }}
{{- fail (printf "metricsPort (%d) must differ from containerPort; set it to 0 to serve /metrics on the http port" (int .Values.metricsPort)) }}
{{- end }}
{{- range $i, $a := .Values.skills.configMaps }}
{{- range $j, $b := $.Values.skills.configMaps }}
{{- if and (ne $i $j) (eq $a.path $b.path) }}
{{- fail (printf "skills.configMaps: the path %s is given twice" $a.path) }}
{{- else if hasPrefix (printf "%s/" $a.path) $b.path }}
{{- fail (printf "skills.configMaps: %s lies inside %s: each skill's folder is a ConfigMap of its own, mounted apart" $b.path $a.path) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail (printf "autoscaling.minReplicas (%d) is greater than autoscaling.maxReplicas (%d)" (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- end }}
{{- end }}
