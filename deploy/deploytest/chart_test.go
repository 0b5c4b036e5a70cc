package deploytest

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// valueSet is one set of chart values and what its rendering must hold
// beyond checkRelease's invariants.
type valueSet struct {
	name  string
	file  string   // under testdata/values
	kinds []string // every kind rendered, sorted, with repeats
	check func(r *release) error
}

func (vs valueSet) path() string { return filepath.Join("testdata", "values", vs.file) }

func (vs valueSet) read(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(vs.path())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var valueSets = []valueSet{
	{
		name: "defaults",
		file: "defaults.yaml",
		// node Service + bundled Redis Service; the Pod is the helm test.
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			d := r.deployments[0]
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
				return fmt.Errorf("default replicas %v, want 3", d.Spec.Replicas)
			}
			s := r.secrets[0]
			if len(s.Data["MCP_STATE_KEY"]) != 44 {
				return fmt.Errorf("generated state key %q is not 32 bytes in base64", s.Data["MCP_STATE_KEY"])
			}
			if len(r.statefulSets[0].Spec.VolumeClaimTemplates) != 0 {
				return fmt.Errorf("bundled Redis has a PVC by default")
			}
			for k := range r.configMaps[0].Data {
				if strings.HasPrefix(k, "MCP_AUTH_") {
					return fmt.Errorf("authorization is configured by default (%s)", k)
				}
			}
			return nil
		},
	},
	{
		name:  "external Redis Sentinel",
		file:  "redis-sentinel.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount"},
		check: func(r *release) error {
			s := r.secrets[0]
			if got := string(s.Data["MCP_REDIS_URL"]); got != "redis-sentinel://:s3cret@sentinel-0.redis:26379,sentinel-1.redis:26379,sentinel-2.redis:26379/mymaster/0" {
				return fmt.Errorf("MCP_REDIS_URL %q", got)
			}
			if got := string(s.Data["MCP_STATE_KEY"]); !strings.HasPrefix(got, "000102") || !strings.Contains(got, ",") {
				return fmt.Errorf("MCP_STATE_KEY %q is not the given pair", got)
			}
			cm := r.configMaps[0]
			if cm.Data["MCP_MAX_SESSIONS"] != "50000" || cm.Data["MCP_SESSION_TTL"] != "1h" {
				return fmt.Errorf("ConfigMap %v lacks the given settings", cm.Data)
			}
			return nil
		},
	},
	{
		name:  "external TLS Redis with a private CA",
		file:  "redis-tls.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount"},
		check: func(r *release) error {
			want := map[string]string{
				"MCP_REDIS_PREFIX": "team-a", "MCP_REDIS_USERNAME": "mcp", "MCP_REDIS_TLS_SERVER_NAME": "redis.internal",
				"MCP_REDIS_PASSWORD_FILE": "/etc/mcpcluster/redis-password/password",
				"MCP_REDIS_CA_FILE":       "/etc/mcpcluster/redis-tls/ca.crt",
				"MCP_REDIS_CERT_FILE":     "/etc/mcpcluster/redis-tls/tls.crt", "MCP_REDIS_KEY_FILE": "/etc/mcpcluster/redis-tls/tls.key",
				"MCP_REDIS_POOL_SIZE": "20", "MCP_REDIS_MIN_IDLE_CONNS": "2", "MCP_REDIS_DIAL_TIMEOUT": "2s",
				"MCP_REDIS_READ_TIMEOUT": "3s", "MCP_REDIS_WRITE_TIMEOUT": "3s",
			}
			for k, v := range want {
				if got := r.configMaps[0].Data[k]; got != v {
					return fmt.Errorf("ConfigMap %s = %q, want %q", k, got, v)
				}
			}
			// The Secrets are mounted whole (a subPath mount never sees a
			// rotation), read-only, where the files are named.
			spec := r.deployments[0].Spec.Template.Spec
			secrets := map[string]string{}
			for _, v := range spec.Volumes {
				if v.Secret != nil {
					secrets[v.Name] = v.Secret.SecretName
				}
			}
			mounts := map[string]string{}
			for _, m := range spec.Containers[0].VolumeMounts {
				if m.SubPath != "" || !m.ReadOnly {
					return fmt.Errorf("volume mount %+v: want the whole Secret, read-only", m)
				}
				mounts[secrets[m.Name]] = m.MountPath
			}
			if mounts["redis-acl"] != "/etc/mcpcluster/redis-password" || mounts["redis-client-tls"] != "/etc/mcpcluster/redis-tls" {
				return fmt.Errorf("Secrets mounted at %v", mounts)
			}
			return nil
		},
	},
	{
		name:  "external Redis Cluster from existing Secrets",
		file:  "existing-secrets.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Service"},
		check: func(r *release) error {
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			if _, ext, _ := r.envValue(c, "MCP_REDIS_URL"); ext == nil || ext.Name != "redis-credentials" || ext.Key != "url" {
				return fmt.Errorf("MCP_REDIS_URL does not come from Secret redis-credentials/url: %+v", ext)
			}
			if _, ext, _ := r.envValue(c, "MCP_STATE_KEY"); ext == nil || ext.Name != "mcp-state-key" || ext.Key != "MCP_STATE_KEY" {
				return fmt.Errorf("MCP_STATE_KEY does not come from Secret mcp-state-key: %+v", ext)
			}
			if sa := r.deployments[0].Spec.Template.Spec.ServiceAccountName; sa != "default" {
				return fmt.Errorf("serviceAccountName %q, want default", sa)
			}
			if p := r.pdbs[0].Spec; p.MinAvailable == nil || *p.MinAvailable != intstr.FromInt32(2) || p.MaxUnavailable != nil {
				return fmt.Errorf("PDB %+v, want minAvailable 2 only", p)
			}
			return nil
		},
	},
	{
		name:  "bundled Redis with persistence",
		file:  "bundled-redis-persistent.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			sts := r.statefulSets[0]
			if len(sts.Spec.VolumeClaimTemplates) != 1 || *sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "fast-ssd" {
				return fmt.Errorf("StatefulSet has no fast-ssd volume claim template")
			}
			if !slices.Contains(sts.Spec.Template.Spec.Containers[0].Args, "--appendonly") {
				return fmt.Errorf("persistent Redis runs without --appendonly")
			}
			return nil
		},
	},
	{
		name:  "HTTPRoute on, Ingress off",
		file:  "httproute.yaml",
		kinds: []string{"ConfigMap", "Deployment", "HTTPRoute", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			hr := r.httpRoutes[0]
			if len(hr.Spec.Hostnames) != 1 || hr.Spec.Hostnames[0] != "mcp.example.com" {
				return fmt.Errorf("hostnames %v", hr.Spec.Hostnames)
			}
			if p := hr.Spec.ParentRefs[0]; p.Namespace == nil || *p.Namespace != "gateway-system" || p.SectionName == nil || *p.SectionName != "https" {
				return fmt.Errorf("parentRef %+v", p)
			}
			m := hr.Spec.Rules[0].Matches[0].Path
			if m == nil || *m.Value != "/mcp" {
				return fmt.Errorf("route does not match /mcp: %+v", m)
			}
			return nil
		},
	},
	{
		name:  "Ingress with TLS",
		file:  "ingress-tls.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Ingress", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			ing := r.ingresses[0]
			if ing.Annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "7200" || ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
				return fmt.Errorf("given annotations do not win: %v", ing.Annotations)
			}
			if p := ing.Spec.Rules[0].HTTP.Paths[0].Path; p != "/v1/mcp" {
				return fmt.Errorf("ingress path %q, want /v1/mcp", p)
			}
			if r.configMaps[0].Data["MCP_PATH"] != "/v1/mcp" {
				return fmt.Errorf("MCP_PATH is not /v1/mcp")
			}
			return nil
		},
	},
	{
		name:  "HPA with the open-streams metric",
		file:  "hpa-streams.yaml",
		kinds: []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			h := r.hpas[0]
			if h.Spec.MaxReplicas != 12 || len(h.Spec.Metrics) != 2 {
				return fmt.Errorf("HPA spec %+v", h.Spec)
			}
			m := h.Spec.Metrics[1]
			if m.Type != autoscalingv2.PodsMetricSourceType || m.Pods.Metric.Name != "mcp_streams_open" || m.Pods.Target.AverageValue.String() != "500" {
				return fmt.Errorf("second metric %+v is not mcp_streams_open averaging 500 per pod", m)
			}
			return nil
		},
	},
	{
		name:  "ServiceMonitor on",
		file:  "servicemonitor.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "ServiceMonitor", "StatefulSet"},
		check: func(r *release) error {
			sm := r.serviceMonitors[0]
			if sm.Labels["release"] != "kube-prometheus-stack" || sm.Spec.Endpoints[0].Interval != "15s" {
				return fmt.Errorf("ServiceMonitor %+v", sm)
			}
			return nil
		},
	},
	{
		name:  "auth: JWT access tokens",
		file:  "auth-jwt.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Ingress", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			if err := authEnv(r, map[string]string{
				"MCP_AUTH_ISSUER":            "https://login.example.com/realms/mcp",
				"MCP_AUTH_RESOURCE":          "https://mcp.example.com/mcp",
				"MCP_AUTH_SCOPES":            "mcp:tools mcp:read",
				"MCP_AUTH_TOOL_SCOPES":       "add=mcp:math;echo=mcp:tools mcp:echo",
				"MCP_AUTH_JWKS_URL":          "https://login.example.com/realms/mcp/protocol/openid-connect/certs",
				"MCP_AUTH_INTROSPECTION_URL": "",
				"MCP_AUTH_CLIENT_ID":         "",
			}); err != nil {
				return err
			}
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			if _, _, found := r.envValue(c, "MCP_AUTH_CLIENT_SECRET"); found {
				return fmt.Errorf("MCP_AUTH_CLIENT_SECRET is set without introspection")
			}
			if _, ok := r.secrets[0].Data["MCP_AUTH_CLIENT_SECRET"]; ok {
				return fmt.Errorf("the chart's Secret holds a client secret without introspection")
			}
			return nil
		},
	},
	{
		name:  "auth: introspection, client secret from an existing Secret",
		file:  "auth-introspection.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			if err := authEnv(r, map[string]string{
				"MCP_AUTH_ISSUER": "https://login.example.com", "MCP_AUTH_RESOURCE": "https://mcp.example.com/mcp",
				"MCP_AUTH_SCOPES": "", "MCP_AUTH_CLIENT_ID": "mcp-nodes", "MCP_AUTH_INTROSPECTION_URL": "",
			}); err != nil {
				return err
			}
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			if _, ext, found := r.envValue(c, "MCP_AUTH_CLIENT_SECRET"); !found || ext == nil || ext.Name != "mcp-oauth" || ext.Key != "client-secret" {
				return fmt.Errorf("MCP_AUTH_CLIENT_SECRET does not come from Secret mcp-oauth/client-secret: %+v", ext)
			}
			if _, ok := r.secrets[0].Data["MCP_AUTH_CLIENT_SECRET"]; ok {
				return fmt.Errorf("the chart's Secret holds a client secret though an existing Secret has it")
			}
			return nil
		},
	},
	{
		name:  "auth: introspection, client secret given as a value",
		file:  "auth-introspection-value.yaml",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount", "StatefulSet"},
		check: func(r *release) error {
			const secret = "do-not-render-me-7f3a"
			if err := authEnv(r, map[string]string{
				"MCP_AUTH_CLIENT_ID": "mcp-nodes", "MCP_AUTH_INTROSPECTION_URL": "https://login.example.com/oauth2/introspect",
			}); err != nil {
				return err
			}
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			v, ext, found := r.envValue(c, "MCP_AUTH_CLIENT_SECRET")
			if !found || ext != nil || v != secret {
				return fmt.Errorf("MCP_AUTH_CLIENT_SECRET resolves to %q (external %+v), want the value from the chart's Secret", v, ext)
			}
			for _, e := range c.Env {
				if e.Name == "MCP_AUTH_CLIENT_SECRET" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					return fmt.Errorf("MCP_AUTH_CLIENT_SECRET is not a secretKeyRef: %+v", e)
				}
			}
			// The value is in the Secret only: not in the ConfigMap, not
			// in the Deployment, in plain text or base64.
			for _, o := range []any{r.configMaps[0], r.deployments[0]} {
				b, err := yaml.Marshal(o)
				if err != nil {
					return err
				}
				if strings.Contains(string(b), secret) || strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte(secret))) {
					return fmt.Errorf("the client secret is rendered into %T:\n%s", o, b)
				}
			}
			return nil
		},
	},
	{
		name:  "everything on",
		file:  "everything.yaml",
		kinds: []string{"ConfigMap", "Deployment", "HTTPRoute", "HorizontalPodAutoscaler", "Ingress", "Pod", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount", "ServiceMonitor"},
		check: func(r *release) error {
			c := r.deployments[0].Spec.Template.Spec.Containers[0]
			if !strings.HasSuffix(c.Image, "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
				return fmt.Errorf("image %q is not pinned by digest", c.Image)
			}
			if r.configMaps[0].Data["MCP_DRAIN_TIMEOUT"] != "60s" || *r.deployments[0].Spec.Template.Spec.TerminationGracePeriodSeconds != 90 {
				return fmt.Errorf("shutdown settings not applied")
			}
			if len(r.ingresses[0].Spec.Rules) != 2 {
				return fmt.Errorf("want 2 ingress rules")
			}
			cm := r.configMaps[0].Data
			if cm["MCP_TRUSTED_PROXIES"] != "10.0.0.0/8,192.168.1.7,fd00::/8" || cm["MCP_CALLER_RATE"] != "50" || cm["MCP_CALLER_BURST"] != "100" || cm["MCP_CALLER_MAX_SESSIONS"] != "1000" {
				return fmt.Errorf("trusted proxies and per-caller limits not applied: %v", cm)
			}
			return skillMounts(r, map[string]string{"/etc/mcpcluster/skills/acme/refunds": "refunds-skill", "/etc/mcpcluster/skills/git-workflow": "git-workflow-skill"})
		},
	},
}

// TestChartRender renders the chart with each value set, decodes every
// object strictly and checks it.
func TestChartRender(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			docs, err := renderChart(t, vs.read(t))
			if err != nil {
				t.Fatal(err)
			}
			r, err := decodeRelease(docs)
			if err != nil {
				t.Fatalf("strict decoding:\n%v", err)
			}
			if got := r.kinds(); !slices.Equal(got, vs.kinds) {
				t.Errorf("rendered kinds %v, want %v", got, vs.kinds)
			}
			if err := checkRelease(r); err != nil {
				t.Errorf("checks:\n%v", err)
			}
			if vs.check != nil && len(r.deployments) == 1 {
				if err := vs.check(r); err != nil {
					t.Errorf("%v", err)
				}
			}
		})
	}
}

// skillMounts checks that the skills folder is the nodes' MCP_SKILLS_DIR
// and that each mount path (under it) holds its ConfigMap, read-only.
func skillMounts(r *release, want map[string]string) error {
	if dir := r.configMaps[0].Data["MCP_SKILLS_DIR"]; dir != "/etc/mcpcluster/skills" {
		return fmt.Errorf("MCP_SKILLS_DIR is %q", dir)
	}
	spec := r.deployments[0].Spec.Template.Spec
	volumes := map[string]string{}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			volumes[v.Name] = v.ConfigMap.Name
		}
	}
	got := map[string]string{}
	for _, m := range spec.Containers[0].VolumeMounts {
		if cm, ok := volumes[m.Name]; ok && m.ReadOnly {
			got[m.MountPath] = cm
		}
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("skill mounts %v, want %v", got, want)
	}
	return nil
}

// authEnv checks the MCP_AUTH_* values the node container gets.
func authEnv(r *release, want map[string]string) error {
	c := &r.deployments[0].Spec.Template.Spec.Containers[0]
	for name, v := range want {
		if got, _, found := r.envValue(c, name); !found || got != v {
			return fmt.Errorf("%s is %q (set %v), want %q", name, got, found, v)
		}
	}
	return nil
}

// TestChartLint runs helm lint --strict with each value set.
func TestChartLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			if out, err := runHelm(t, "lint", "--strict", chartDir(t), "--values", vs.path()); err != nil {
				t.Fatal(err)
			} else if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("unexpected lint output:\n%s", out)
			}
		})
	}
}

// TestChartRejectsBadValues checks that bad values fail helm template (as
// they fail helm install) with a message naming the problem. Schema
// violations fail helm lint --strict too; a template's fail only logs in
// helm lint (lint mode), so for those the message must show in its output.
func TestChartRejectsBadValues(t *testing.T) {
	cases := []struct {
		name, values, want string
		schema             bool // a values.schema.json violation, not a template fail
	}{
		{"wrong type", "replicaCount: three\n", "replicaCount", true},
		{"unknown key", "replicas: 3\n", "replicas", true},
		{"typo in nested key", "ingress: {enabeld: true}\n", "enabeld", true},
		{"grace period too short", "shutdown: {preStopSleepSeconds: 5, drainTimeoutSeconds: 20, terminationGracePeriodSeconds: 25}\n",
			"terminationGracePeriodSeconds (25) must be greater than", false},
		{"grace period too short for a longer drain", "shutdown: {drainTimeoutSeconds: 60}\n",
			"terminationGracePeriodSeconds (35) must be greater than", false},
		{"grace period too short for the drain delay", "shutdown: {drainDelaySeconds: 10}\n",
			"(5 + 10 + 20 = 35)", false},
		{"a skill inside another", "skills: {configMaps: [{name: a, path: x}, {name: b, path: x/y}]}\n", "x/y lies inside x", false},
		{"a skill path leaving the folder", "skills: {configMaps: [{name: a, path: ../x}]}\n", "configMaps/0/path", true},
		{"external Redis without URL", "redis: {mode: external}\n", "/redis", true},
		{"Redis URL of another scheme", "redis: {mode: external, url: \"http://redis:6379\"}\n", "/redis/url", true},
		{"bad state key", "stateKey: {value: not-a-key}\n", "/stateKey/value", true},
		{"writable root filesystem", "securityContext: {readOnlyRootFilesystem: false, allowPrivilegeEscalation: false}\n", "readOnlyRootFilesystem", true},
		{"running as root allowed", "podSecurityContext: {runAsNonRoot: false}\n", "runAsNonRoot", true},
		{"short ingress stream timeout", "ingress: {enabled: true, streamTimeoutSeconds: 60}\n", "streamTimeoutSeconds", true},
		{"HTTPRoute without a Gateway", "httpRoute: {enabled: true}\n", "parentRefs", true},
		{"HTTPRoute with a request timeout", "httpRoute: {enabled: true, parentRefs: [{name: gw}], timeouts: {request: 30}}\n", "/httpRoute/timeouts/request", true},
		{"reserved setting in config", "config: {MCP_REDIS_URL: \"redis://x:6379\"}\n", "MCP_REDIS_URL", true},
		{"setting that is not MCP_*", "config: {LOG_LEVEL: debug}\n", "LOG_LEVEL", true},
		{"autoscaling bounds reversed", "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 3}\n", "minReplicas (5) is greater than", false},
		{"zero surge", "rollingUpdate: {maxSurge: 0}\n", "maxSurge", true},
		{"auth issuer without resource", "auth: {issuer: \"https://login.example.com\"}\n", "/auth/resource", true},
		{"auth resource without issuer", "auth: {resource: \"https://mcp.example.com/mcp\"}\n", "/auth/resource", true},
		{"auth issuer not a URL", "auth: {issuer: login.example.com, resource: \"https://mcp.example.com/mcp\"}\n", "/auth/issuer", true},
		{"auth resource with a fragment", "auth: {issuer: \"https://login.example.com\", resource: \"https://mcp.example.com/mcp#x\"}\n", "/auth/resource", true},
		{"auth scope with a space", "auth: {issuer: \"https://a.example\", resource: \"https://a.example/mcp\", scopes: [\"mcp tools\"]}\n", "/auth/scopes/0", true},
		{"introspection without a client secret", "auth: {issuer: \"https://a.example\", resource: \"https://a.example/mcp\", introspection: {clientID: nodes}}\n", "/auth/introspection/existingSecret", true},
		{"client secret without a client id", "auth: {issuer: \"https://a.example\", resource: \"https://a.example/mcp\", introspection: {existingSecret: s}}\n", "/auth/introspection/existingSecret", true},
		{"JWKS and introspection both", "auth: {issuer: \"https://a.example\", resource: \"https://a.example/mcp\", jwksURL: \"https://a.example/jwks\", introspection: {clientID: nodes, clientSecret: s3cret}}\n", "/auth/jwksURL", true},
		{"trusted proxy that is no address", "trustedProxies: [proxy.example.com]\n", "/trustedProxies/0", true},
		{"per-caller rate of zero", "limits: {callerRate: 0}\n", "/limits/callerRate", true},
		{"trusted proxies in config", "config: {MCP_TRUSTED_PROXIES: 10.0.0.0/8}\n", "MCP_TRUSTED_PROXIES", true},
		{"tool scopes without issuer", "auth: {toolScopes: {add: [mcp:math]}}\n", "/auth/toolScopes", true},
		{"tool name with =", "auth: {issuer: \"https://a.example\", resource: \"https://a.example/mcp\", toolScopes: {\"a=b\": [x]}}\n", "a=b", true},
		{"tool with no scopes", "auth: {issuer: \"https://a.example\", resource: \"https://a.example/mcp\", toolScopes: {add: []}}\n", "/auth/toolScopes/add", true},
		{"auth setting in config", "config: {MCP_AUTH_CLIENT_SECRET: s3cret}\n", "MCP_AUTH_CLIENT_SECRET", true},
		{"Redis prefix with a colon", "redis: {prefix: \"a:b\"}\n", "/redis/prefix", true},
		{"Redis prefix with a hash tag", "redis: {prefix: \"{a}\"}\n", "/redis/prefix", true},
		{"Redis setting in config", "config: {MCP_REDIS_CA_FILE: /ca.pem}\n", "MCP_REDIS_CA_FILE", true},
		{"negative Redis pool", "redis: {connection: {poolSize: -1}}\n", "/redis/connection/poolSize", true},
		{"Redis timeout not a duration", "redis: {connection: {readTimeout: 5}}\n", "/redis/connection/readTimeout", true},
		{"client certificate without its key", "redis: {mode: external, url: \"rediss://r:6380\", tls: {existingSecret: s, keyKey: \"\"}}\n", "/redis/tls/keyKey", true},
		{"TLS Secret for the bundled Redis", "redis: {tls: {existingSecret: s}}\n", "the bundled one speaks no TLS", false},
		{"TLS Secret with a plain URL", "redis: {mode: external, url: \"redis://r:6379\", tls: {existingSecret: s}}\n", "needs a TLS URL", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			values := writeValues(t, tc.values)
			_, err := runHelm(t, "template", "mcp", chartDir(t), "--namespace", "mcp", "--values", values)
			if err == nil {
				t.Fatalf("helm template accepted the values:\n%s", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template failed without naming %q:\n%v", tc.want, err)
			}
			t.Logf("helm template: %s", firstErrorLine(err.Error()))
			out, err := runHelmCombined(t, "lint", "--strict", chartDir(t), "--values", values)
			if tc.schema && err == nil {
				t.Fatalf("helm lint --strict accepted the values:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("helm lint --strict does not report %q:\n%s", tc.want, out)
			}
		})
	}
}

// firstErrorLine picks the gist of helm's error: the schema violations
// ("- at '/path': ...") when there are some, else the "Error: ..." line.
func firstErrorLine(s string) string {
	var at []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "- at ") {
			at = append(at, l)
		}
	}
	if len(at) > 0 {
		return "schema: " + strings.Join(at, "; ")
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "Error:") {
			return l
		}
	}
	return strings.SplitN(s, "\n", 2)[0]
}

// TestStrictDecodingRejects checks that the strict decoding used above
// catches what helm template lets through: unknown fields, wrong types,
// duplicate keys and kinds no scheme knows.
func TestStrictDecodingRejects(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"unknown Deployment field", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  replica: 3
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}
`, `unknown field "spec.replica"`},
		{"wrong type", `
apiVersion: v1
kind: Service
metadata: {name: x}
spec: {ports: [{port: "eighty"}]}
`, "port"},
		{"duplicate key", `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data: {A: "1", A: "2"}
`, `key "A" already set`},
		{"HTTPRoute typo", `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: x}
spec:
  parentRefs: [{name: gw}]
  rules: [{timeout: {request: 0s}}]
`, `unknown field "spec.rules[0].timeout"`},
		{"ServiceMonitor typo", `
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: x}
spec:
  selector: {}
  endpoints: [{port: http, pathh: /metrics}]
`, `unknown field "spec.endpoints[0].pathh"`},
		{"unknown kind", `
apiVersion: example.com/v1
kind: Widget
metadata: {name: x}
`, "no kind"},
		{"preStop sleep as a string", `
apiVersion: v1
kind: Pod
metadata: {name: x}
spec:
  containers: [{name: c, image: i, lifecycle: {preStop: {sleep: {seconds: five}}}}]
`, "seconds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeStrict([]byte(tc.doc))
			if err == nil {
				t.Fatal("decoded without error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not mention %q: %v", tc.want, err)
			}
			t.Logf("rejected: %s", strings.SplitN(err.Error(), "\n", 2)[0])
		})
	}
}

// TestChartNotes renders NOTES.txt (helm install --dry-run=client, no
// cluster) and checks it tells how to reach the endpoint.
func TestChartNotes(t *testing.T) {
	out, err := runHelm(t, "install", "mcp", chartDir(t), "--namespace", "mcp", "--dry-run=client",
		"--values", writeValues(t, "ingress: {enabled: true, hosts: [{host: mcp.example.com}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := strings.Cut(out, "\nNOTES:\n")
	if !ok {
		t.Fatalf("no NOTES in:\n%s", out)
	}
	for _, want := range []string{
		"kubectl port-forward -n mcp svc/mcp-mcpcluster 8080:80",
		"http://mcp.example.com/mcp",
		"http://mcp-mcpcluster.mcp.svc:80/mcp",
		"bundled single-pod StatefulSet",
		"authorization is off",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	out, err = runHelm(t, "install", "mcp", chartDir(t), "--namespace", "mcp", "--dry-run=client",
		"--values", filepath.Join("testdata", "values", "auth-jwt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, notes, _ = strings.Cut(out, "\nNOTES:\n"); !strings.Contains(notes, "Authorization is on: tokens from https://login.example.com/realms/mcp with audience https://mcp.example.com/mcp and scopes mcp:tools mcp:read") ||
		strings.Contains(notes, "authorization is off") {
		t.Errorf("NOTES with auth on:\n%s", notes)
	}
}

// TestValueSetFiles checks that every file under testdata/values is a value
// set above (scripts/chart-apiserver.sh installs them all).
func TestValueSetFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, vs := range valueSets {
		known[vs.path()] = true
	}
	for _, f := range files {
		if !known[f] {
			t.Errorf("%s is no value set of TestChartRender", f)
		}
	}
	if len(files) != len(valueSets) {
		t.Errorf("%d files for %d value sets", len(files), len(valueSets))
	}
}

// TestCheckReleaseRejects breaks rendered objects one way at a time and
// checks that checkRelease names each breakage.
func TestCheckReleaseRejects(t *testing.T) {
	one := intstr.FromInt32(1)
	cases := []struct {
		name, file string
		mutate     func(r *release)
		want       string
	}{
		{"no preStop sleep", "defaults.yaml", func(r *release) {
			r.deployments[0].Spec.Template.Spec.Containers[0].Lifecycle = nil
		}, "container has no preStop sleep"},
		{"grace period too short", "defaults.yaml", func(r *release) {
			g := int64(25)
			r.deployments[0].Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "terminationGracePeriodSeconds 25 is not greater than preStop sleep 5s + drain delay 0s + drain 20s"},
		{"readiness on /healthz", "defaults.yaml", func(r *release) {
			r.deployments[0].Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/healthz"
		}, "readiness probe: GET /healthz"},
		{"maxUnavailable 1", "defaults.yaml", func(r *release) {
			r.deployments[0].Spec.Strategy.RollingUpdate.MaxUnavailable = &one
		}, "maxUnavailable 0"},
		{"writable root filesystem", "defaults.yaml", func(r *release) {
			f := false
			r.deployments[0].Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = &f
		}, "root filesystem must be read-only"},
		{"Service selects nothing", "defaults.yaml", func(r *release) {
			for _, s := range r.services {
				s.Spec.Selector["app.kubernetes.io/instance"] = "other"
			}
		}, "no Service selects the node pods"},
		{"dangling ConfigMap", "defaults.yaml", func(r *release) {
			r.configMaps[0].Name = "renamed"
		}, "envFrom ConfigMap mcp-mcpcluster is not rendered"},
		{"HTTPRoute request timeout", "httproute.yaml", func(r *release) {
			d := gatewayDuration("30s")
			r.httpRoutes[0].Spec.Rules[0].Timeouts.Request = &d
		}, "would cut SSE streams"},
		{"Ingress buffering", "ingress-tls.yaml", func(r *release) {
			r.ingresses[0].Annotations["nginx.ingress.kubernetes.io/proxy-buffering"] = "on"
		}, "proxy-buffering annotation is \"on\""},
		{"metrics port not exposed", "defaults.yaml", func(r *release) {
			c := &r.deployments[0].Spec.Template.Spec.Containers[0]
			c.Ports = c.Ports[:1]
		}, "MCP_METRICS_ADDR port 7979 is not the container port named metrics"},
		{"client secret in the ConfigMap", "auth-introspection-value.yaml", func(r *release) {
			r.configMaps[0].Data["MCP_AUTH_CLIENT_SECRET"] = "s3cret"
		}, "holds MCP_AUTH_CLIENT_SECRET: secrets belong in a Secret"},
		{"ServiceMonitor on another port", "servicemonitor.yaml", func(r *release) {
			r.serviceMonitors[0].Spec.Endpoints[0].Port = "nosuch"
		}, "endpoint port \"nosuch\" is not a port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			docs, err := renderChart(t, valueSet{file: tc.file}.read(t))
			if err != nil {
				t.Fatal(err)
			}
			r, err := decodeRelease(docs)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRelease(r); err != nil {
				t.Fatalf("unbroken release fails: %v", err)
			}
			tc.mutate(r)
			err = checkRelease(r)
			if err == nil {
				t.Fatal("checkRelease accepted the broken release")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkRelease failed without naming %q:\n%v", tc.want, err)
			}
			t.Logf("rejected: %v", err)
		})
	}
}
