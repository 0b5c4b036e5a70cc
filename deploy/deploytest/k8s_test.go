package deploytest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// scheme knows every built-in Kubernetes type (client-go's scheme), the
// Gateway API v1 types and the Prometheus Operator's monitoring/v1 types.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, gatewayv1.Install, monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strictCodec decodes YAML into typed objects and fails on unknown or
// duplicate fields, wrong types and unregistered kinds.
var strictCodec = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// decodeStrict decodes one rendered document.
func decodeStrict(doc []byte) (runtime.Object, error) {
	obj, gvk, err := strictCodec.Decode(doc, nil, nil)
	if err != nil {
		kind := "object"
		if gvk != nil {
			kind = gvk.String()
		}
		return nil, fmt.Errorf("%s: %w\n---\n%s", kind, err, doc)
	}
	return obj, nil
}

// release is a rendered chart, decoded.
type release struct {
	objects         []runtime.Object
	deployments     []*appsv1.Deployment
	statefulSets    []*appsv1.StatefulSet
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	serviceAccounts []*corev1.ServiceAccount
	pods            []*corev1.Pod
	ingresses       []*networkingv1.Ingress
	httpRoutes      []*gatewayv1.HTTPRoute
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
}

// decodeRelease strictly decodes every document, failing on the first
// that does not decode or whose kind the chart is not expected to create.
func decodeRelease(docs [][]byte) (*release, error) {
	r := &release{}
	var errs []error
	for _, doc := range docs {
		obj, err := decodeStrict(doc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.objects = append(r.objects, obj)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments = append(r.deployments, o)
		case *appsv1.StatefulSet:
			r.statefulSets = append(r.statefulSets, o)
		case *corev1.Service:
			r.services = append(r.services, o)
		case *corev1.ConfigMap:
			r.configMaps = append(r.configMaps, o)
		case *corev1.Secret:
			r.secrets = append(r.secrets, o)
		case *corev1.ServiceAccount:
			r.serviceAccounts = append(r.serviceAccounts, o)
		case *corev1.Pod:
			r.pods = append(r.pods, o)
		case *networkingv1.Ingress:
			r.ingresses = append(r.ingresses, o)
		case *gatewayv1.HTTPRoute:
			r.httpRoutes = append(r.httpRoutes, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			r.hpas = append(r.hpas, o)
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *monitoringv1.ServiceMonitor:
			r.serviceMonitors = append(r.serviceMonitors, o)
		default:
			errs = append(errs, fmt.Errorf("unexpected kind %s", obj.GetObjectKind().GroupVersionKind()))
		}
	}
	return r, errors.Join(errs...)
}

// kinds lists the kinds in the release, sorted, with repeats.
func (r *release) kinds() []string {
	var out []string
	for _, o := range r.objects {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind)
	}
	slices.Sort(out)
	return out
}

func (r *release) configMap(name string) *corev1.ConfigMap {
	for _, c := range r.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (r *release) secret(name string) *corev1.Secret {
	for _, s := range r.secrets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (r *release) service(name string) *corev1.Service {
	for _, s := range r.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// envValue resolves the value of env var name in c: from a literal, or from
// a rendered ConfigMap or Secret; external reports a reference to an object
// the release does not render (an existing Secret).
func (r *release) envValue(c *corev1.Container, name string) (value string, external *corev1.SecretKeySelector, found bool) {
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		if e.ValueFrom == nil {
			return e.Value, nil, true
		}
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			s := r.secret(ref.Name)
			if s == nil {
				return "", ref, true
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				v2, ok2 := s.StringData[ref.Key]
				return v2, nil, ok2
			}
			return string(v), nil, true
		}
		return "", nil, true // downward API
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			if cm := r.configMap(from.ConfigMapRef.Name); cm != nil {
				if v, ok := cm.Data[name]; ok {
					return v, nil, true
				}
			}
		}
	}
	return "", nil, false
}

func selects(sel map[string]string, lbls map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(lbls))
}

func labelSelects(sel *metav1.LabelSelector, lbls map[string]string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(lbls))
}

// checkRelease checks the invariants every rendering of the chart keeps:
// names and labels valid; one node Deployment with probes on /healthz and
// /readyz, a preStop sleep, a grace period longer than preStop + drain,
// maxUnavailable 0, resources, a non-root read-only container; every
// reference (ConfigMap, Secret, ServiceAccount, Service, port, selector)
// resolving within the release; Ingress and HTTPRoute set up for SSE.
func checkRelease(r *release) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	seen := map[string]bool{}
	for _, o := range r.objects {
		m, err := metaOf(o)
		if err != nil {
			bad("%v", err)
			continue
		}
		kind := o.GetObjectKind().GroupVersionKind().Kind
		id := kind + "/" + m.GetName()
		if seen[id] {
			bad("%s rendered twice", id)
		}
		seen[id] = true
		for _, msg := range validation.IsDNS1123Subdomain(m.GetName()) {
			bad("%s: name: %s", id, msg)
		}
		if kind == "Service" {
			for _, msg := range validation.IsDNS1035Label(m.GetName()) {
				bad("%s: Service name: %s", id, msg)
			}
		}
		for k, v := range m.GetLabels() {
			for _, msg := range validation.IsQualifiedName(k) {
				bad("%s: label key %q: %s", id, k, msg)
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				bad("%s: label %s value %q: %s", id, k, v, msg)
			}
		}
	}

	if len(r.deployments) != 1 {
		bad("want one Deployment, got %d", len(r.deployments))
		return errors.Join(errs...)
	}
	d := r.deployments[0]
	pod := d.Spec.Template
	if !labelSelects(d.Spec.Selector, pod.Labels) {
		bad("Deployment selector %v does not select its pods %v", d.Spec.Selector, pod.Labels)
	}
	if s := d.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.String() != "0" {
		bad("Deployment: rolling update must have maxUnavailable 0, got %+v", s)
	}
	if (d.Spec.Replicas == nil) != (len(r.hpas) > 0) {
		bad("Deployment replicas must be set exactly when no HPA owns them (replicas %v, %d HPA)", d.Spec.Replicas, len(r.hpas))
	}
	ps := pod.Spec
	if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
		bad("pod securityContext must set runAsNonRoot: true")
	}
	if ps.SecurityContext != nil && ps.SecurityContext.RunAsUser != nil && *ps.SecurityContext.RunAsUser == 0 {
		bad("pod securityContext runs as root")
	}
	if ps.ServiceAccountName != "" && ps.ServiceAccountName != "default" {
		found := false
		for _, sa := range r.serviceAccounts {
			found = found || sa.Name == ps.ServiceAccountName
		}
		if !found && len(r.serviceAccounts) > 0 {
			bad("pod serviceAccountName %s is not the rendered ServiceAccount", ps.ServiceAccountName)
		}
	}
	if len(ps.Containers) != 1 {
		bad("want one container in the node pod, got %d", len(ps.Containers))
		return errors.Join(errs...)
	}
	c := &ps.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		bad("container has no securityContext")
	default:
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("container root filesystem must be read-only")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container must set allowPrivilegeEscalation: false")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			bad("container must drop ALL capabilities")
		}
	}
	if len(c.Resources.Requests) == 0 {
		bad("container has no resource requests")
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" }) {
		bad("container has no port named http")
	}
	probePath := func(name string, p *corev1.Probe, want string) {
		if p == nil || p.HTTPGet == nil {
			bad("%s probe is not an HTTP GET", name)
			return
		}
		if p.HTTPGet.Path != want || p.HTTPGet.Port.String() != "http" {
			bad("%s probe: GET %s on port %s, want %s on http", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), want)
		}
	}
	probePath("liveness", c.LivenessProbe, "/healthz")
	probePath("readiness", c.ReadinessProbe, "/readyz")
	if c.StartupProbe != nil {
		probePath("startup", c.StartupProbe, "/healthz")
	}

	// Shutdown: grace > preStop sleep + drain delay + drain timeout.
	var sleep int64
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		bad("container has no preStop sleep")
	} else {
		sleep = c.Lifecycle.PreStop.Sleep.Seconds
	}
	drainText, _, ok := r.envValue(c, "MCP_DRAIN_TIMEOUT")
	drain, err := time.ParseDuration(drainText)
	switch {
	case !ok:
		bad("MCP_DRAIN_TIMEOUT is not set (the default 20s would apply unseen)")
	case err != nil:
		bad("MCP_DRAIN_TIMEOUT %q: %v", drainText, err)
	}
	var delay time.Duration
	if delayText, _, ok := r.envValue(c, "MCP_DRAIN_DELAY"); ok {
		if delay, err = time.ParseDuration(delayText); err != nil {
			bad("MCP_DRAIN_DELAY %q: %v", delayText, err)
		}
	}
	if g := ps.TerminationGracePeriodSeconds; g == nil {
		bad("terminationGracePeriodSeconds is not set")
	} else if time.Duration(*g)*time.Second <= time.Duration(sleep)*time.Second+delay+drain {
		bad("terminationGracePeriodSeconds %d is not greater than preStop sleep %ds + drain delay %s + drain %s", *g, sleep, delay, drain)
	}

	// Every env var the node needs resolves.
	for _, name := range []string{"MCP_ADDR", "MCP_PATH", "MCP_NODE_ID", "MCP_STATE_KEY", "MCP_REDIS_URL"} {
		if _, _, ok := r.envValue(c, name); !ok {
			bad("node env %s is not set or its ConfigMap/Secret is not rendered", name)
		}
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil && r.configMap(from.ConfigMapRef.Name) == nil {
			bad("envFrom ConfigMap %s is not rendered", from.ConfigMapRef.Name)
		}
	}
	for _, cm := range r.configMaps {
		for k := range cm.Data {
			if !strings.HasPrefix(k, "MCP_") {
				bad("ConfigMap %s has key %s: the node reads only MCP_* settings", cm.Name, k)
			}
			if k == "MCP_STATE_KEY" || k == "MCP_REDIS_URL" || k == "MCP_AUTH_CLIENT_SECRET" {
				bad("ConfigMap %s holds %s: secrets belong in a Secret", cm.Name, k)
			}
		}
	}
	if addr, _, _ := r.envValue(c, "MCP_ADDR"); !strings.HasPrefix(addr, "0.0.0.0:") {
		bad("MCP_ADDR %q does not listen on every interface", addr)
	} else if port := strings.TrimPrefix(addr, "0.0.0.0:"); !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return strconv.Itoa(int(p.ContainerPort)) == port
	}) {
		bad("MCP_ADDR port %s is not a container port", port)
	}
	// /metrics on its own listener: reachable in the pod, and a port
	// other than the MCP one.
	if addr, _, _ := r.envValue(c, "MCP_METRICS_ADDR"); addr != "" {
		if !strings.HasPrefix(addr, "0.0.0.0:") {
			bad("MCP_METRICS_ADDR %q does not listen on every interface", addr)
		} else if port := strings.TrimPrefix(addr, "0.0.0.0:"); !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return strconv.Itoa(int(p.ContainerPort)) == port && p.Name == "metrics"
		}) {
			bad("MCP_METRICS_ADDR port %s is not the container port named metrics", port)
		}
	}
	if key, ext, _ := r.envValue(c, "MCP_STATE_KEY"); ext == nil && key == "" {
		bad("MCP_STATE_KEY is empty")
	}
	redisURL, redisExt, _ := r.envValue(c, "MCP_REDIS_URL")
	if redisExt == nil && redisURL == "" {
		bad("MCP_REDIS_URL is empty")
	}
	if len(r.statefulSets) > 0 {
		sts := r.statefulSets[0]
		if svc := r.service(sts.Spec.ServiceName); svc == nil {
			bad("bundled Redis governing Service %s is not rendered", sts.Spec.ServiceName)
		} else if !selects(svc.Spec.Selector, sts.Spec.Template.Labels) {
			bad("Service %s does not select the Redis pods", svc.Name)
		}
		if want := "redis://" + sts.Spec.ServiceName + ":6379/"; !strings.HasPrefix(redisURL, want) {
			bad("MCP_REDIS_URL %q does not point at the bundled Redis (%s...)", redisURL, want)
		}
		for _, ctr := range sts.Spec.Template.Spec.Containers {
			if ctr.SecurityContext == nil || ctr.SecurityContext.ReadOnlyRootFilesystem == nil || !*ctr.SecurityContext.ReadOnlyRootFilesystem {
				bad("bundled Redis container %s: root filesystem must be read-only", ctr.Name)
			}
		}
	}

	// The node Service selects the node pods (and not Redis).
	var nodeSvc *corev1.Service
	for _, s := range r.services {
		if selects(s.Spec.Selector, pod.Labels) {
			if nodeSvc != nil {
				bad("Services %s and %s both select the node pods", nodeSvc.Name, s.Name)
			}
			nodeSvc = s
		}
	}
	if nodeSvc == nil {
		bad("no Service selects the node pods")
		return errors.Join(errs...)
	}
	if nodeSvc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		bad("node Service uses session affinity: every node must serve every session")
	}
	svcPort := func(name string) *corev1.ServicePort {
		for i := range nodeSvc.Spec.Ports {
			if nodeSvc.Spec.Ports[i].Name == name {
				return &nodeSvc.Spec.Ports[i]
			}
		}
		return nil
	}
	if p := svcPort("http"); p == nil || p.TargetPort.String() != "http" {
		bad("node Service has no port http targeting the container port http")
	}
	for _, pdb := range r.pdbs {
		if !labelSelects(pdb.Spec.Selector, pod.Labels) {
			bad("PodDisruptionBudget %s does not select the node pods", pdb.Name)
		}
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			bad("PodDisruptionBudget %s must set exactly one of minAvailable and maxUnavailable", pdb.Name)
		}
	}
	for _, h := range r.hpas {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
			bad("HPA %s scales %s/%s, not the Deployment %s", h.Name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, d.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			bad("HPA %s: minReplicas must be set and not above maxReplicas", h.Name)
		}
	}
	for _, ing := range r.ingresses {
		a := ing.Annotations
		if a["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
			bad("Ingress %s: proxy-buffering annotation is %q, want off", ing.Name, a["nginx.ingress.kubernetes.io/proxy-buffering"])
		}
		if t, err := strconv.Atoi(a["nginx.ingress.kubernetes.io/proxy-read-timeout"]); err != nil || time.Duration(t)*time.Second < minStreamTimeout {
			bad("Ingress %s: proxy-read-timeout %q is not at least %s", ing.Name, a["nginx.ingress.kubernetes.io/proxy-read-timeout"], minStreamTimeout)
		}
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				b := p.Backend.Service
				if b == nil || b.Name != nodeSvc.Name || svcPort(b.Port.Name) == nil {
					bad("Ingress %s: path %s does not route to a port of Service %s", ing.Name, p.Path, nodeSvc.Name)
				}
			}
		}
	}
	for _, hr := range r.httpRoutes {
		if len(hr.Spec.ParentRefs) == 0 {
			bad("HTTPRoute %s has no parentRefs", hr.Name)
		}
		for _, rule := range hr.Spec.Rules {
			if rule.Timeouts == nil || rule.Timeouts.Request == nil || *rule.Timeouts.Request != "0s" {
				bad("HTTPRoute %s: a rule without timeouts.request \"0s\" would cut SSE streams", hr.Name)
			}
			for _, b := range rule.BackendRefs {
				if string(b.Name) != nodeSvc.Name || b.Port == nil || !slices.ContainsFunc(nodeSvc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(*b.Port) }) {
					bad("HTTPRoute %s: backendRef %s does not name a port of Service %s", hr.Name, b.Name, nodeSvc.Name)
				}
			}
		}
	}
	for _, sm := range r.serviceMonitors {
		if !labelSelects(&sm.Spec.Selector, nodeSvc.Labels) {
			bad("ServiceMonitor %s does not select the node Service", sm.Name)
		}
		for _, s := range r.services {
			if s != nodeSvc && labelSelects(&sm.Spec.Selector, s.Labels) {
				bad("ServiceMonitor %s also selects Service %s", sm.Name, s.Name)
			}
		}
		for _, ep := range sm.Spec.Endpoints {
			if svcPort(ep.Port) == nil {
				bad("ServiceMonitor %s: endpoint port %q is not a port of Service %s", sm.Name, ep.Port, nodeSvc.Name)
			}
			if ep.Path != "/metrics" {
				bad("ServiceMonitor %s: path %q, want /metrics", sm.Name, ep.Path)
			}
		}
	}
	return errors.Join(errs...)
}

func metaOf(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", o)
	}
	return m, nil
}

func gatewayDuration(s string) gatewayv1.Duration { return gatewayv1.Duration(s) }
