// Package telemetry holds the node's metrics (Prometheus text on
// /metrics), its tracer and the propagation of trace context
// (OpenTelemetry). It sets up no exporter: that is the program's choice
// (cmd/server installs an OTLP one when the OTEL_* variables ask for it),
// so a program importing mcp links none.
package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the node's instruments. A nil *Metrics is valid and records
// nothing, so instrumented code never checks.
type Metrics struct {
	reg    *prometheus.Registry
	labels prometheus.Labels

	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	streams       *prometheus.GaugeVec
	bus           *prometheus.CounterVec
	replayed      prometheus.Counter
	backendErrors prometheus.Counter
	sessions      *prometheus.CounterVec
	draining      prometheus.Gauge
}

// NewMetrics returns a fresh registry with every instrument and the Go
// runtime and process collectors. node labels every series.
func NewMetrics(node string) *Metrics {
	reg := prometheus.NewRegistry()
	constLabels := prometheus.Labels{"node": node}
	m := &Metrics{
		reg:    reg,
		labels: constLabels,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_requests_total", Help: "MCP requests handled, by method and outcome (ok, error, input_required).", ConstLabels: constLabels,
		}, []string{"method", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_request_duration_seconds", Help: "Time to answer an MCP request, by method.", ConstLabels: constLabels,
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_streams_open", Help: "Open SSE streams on this node, by kind (post, get, resume, listen).", ConstLabels: constLabels,
		}, []string{"kind"}),
		bus: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_bus_messages_total", Help: "Messages on the inter-node bus, by direction (sent, received).", ConstLabels: constLabels,
		}, []string{"direction"}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_replayed_events_total", Help: "SSE events written from stream history to resuming clients.", ConstLabels: constLabels,
		}),
		backendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_backend_errors_total", Help: "Shared-state (Redis) operations that failed because the store was unreachable.", ConstLabels: constLabels,
		}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_sessions_total", Help: "Sessions created and ended through this node.", ConstLabels: constLabels,
		}, []string{"event"}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_draining", Help: "1 while the node drains for shutdown.", ConstLabels: constLabels,
		}),
	}
	reg.MustRegister(m.requests, m.latency, m.streams, m.bus, m.replayed, m.backendErrors, m.sessions, m.draining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// GaugeFunc registers a gauge read from fn at scrape time (live sessions,
// pending server→client requests).
func (m *Metrics) GaugeFunc(name, help string, fn func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: m.labels}, fn))
}

// Handler serves the Prometheus text exposition.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Request records one handled request.
func (m *Metrics) Request(method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(method, outcome).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}

// StreamOpened counts an open stream of kind until the returned func runs.
func (m *Metrics) StreamOpened(kind string) func() {
	if m == nil {
		return func() {}
	}
	g := m.streams.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// BusSent and BusReceived count bus messages.
func (m *Metrics) BusSent() {
	if m != nil {
		m.bus.WithLabelValues("sent").Inc()
	}
}

func (m *Metrics) BusReceived() {
	if m != nil {
		m.bus.WithLabelValues("received").Inc()
	}
}

// Replayed counts events written from history.
func (m *Metrics) Replayed(n int) {
	if m != nil && n > 0 {
		m.replayed.Add(float64(n))
	}
}

// BackendError counts an unreachable-store failure.
func (m *Metrics) BackendError() {
	if m != nil {
		m.backendErrors.Inc()
	}
}

// Session counts a session event: created or ended.
func (m *Metrics) Session(event string) {
	if m != nil {
		m.sessions.WithLabelValues(event).Inc()
	}
}

// Draining sets the drain gauge.
func (m *Metrics) Draining(on bool) {
	if m == nil {
		return
	}
	if on {
		m.draining.Set(1)
	} else {
		m.draining.Set(0)
	}
}

// Counter registers a counter and returns the function that increments
// it (a no-op on nil Metrics).
func (m *Metrics) Counter(name, help string) func() {
	if m == nil {
		return func() {}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: m.labels})
	m.reg.MustRegister(c)
	return c.Inc
}
