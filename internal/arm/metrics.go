package arm

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "azure_ccm_arm"

// Metrics are the ARM access layer's Prometheus metrics. They are registered with the
// component-base legacy registry, so the CCM's /metrics serves them.
type Metrics struct {
	Requests       *metrics.CounterVec
	Latency        *metrics.HistogramVec
	ThrottledSecs  *metrics.CounterVec
	ThrottleEvents *metrics.CounterVec
	Coalesced      *metrics.CounterVec
	CacheLists     *metrics.CounterVec
	GateWaiting    *metrics.GaugeVec
	GateRemaining  *metrics.GaugeVec
	GateRefill     *metrics.GaugeVec

	compatMetrics
}

var (
	defaultMetrics     *Metrics
	defaultMetricsOnce sync.Once
)

// DefaultMetrics returns the process-wide metrics, registering them on first use.
func DefaultMetrics() *Metrics {
	defaultMetricsOnce.Do(func() {
		defaultMetrics = newMetrics()
		for _, c := range defaultMetrics.collectors() {
			legacyregistry.MustRegister(c)
		}
	})
	return defaultMetrics
}

// NewMetrics creates metrics registered with their own registry (tests; several clients in one
// process). component-base metrics record nothing until registered.
func NewMetrics() *Metrics {
	m := newMetrics()
	reg := metrics.NewKubeRegistry()
	for _, c := range m.collectors() {
		reg.MustRegister(c)
	}
	return m
}

func newMetrics() *Metrics {
	return &Metrics{
		compatMetrics: newCompatMetrics(),
		Requests: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: metricsSubsystem, Name: "requests_total",
			Help:           "ARM requests sent, by operation (get, list, put, patch, delete, post), resource type and result.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"operation", "resource_type", "result"}),
		Latency: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Subsystem: metricsSubsystem, Name: "request_duration_seconds",
			Help:           "Latency of ARM requests (one attempt), by operation and resource type.",
			Buckets:        []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
			StabilityLevel: metrics.ALPHA,
		}, []string{"operation", "resource_type"}),
		ThrottledSecs: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: metricsSubsystem, Name: "throttled_seconds_total",
			Help:           "Seconds callers spent waiting at the throttle gate, by class (read, write, delete).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"class"}),
		ThrottleEvents: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: metricsSubsystem, Name: "throttle_events_total",
			Help:           "Times the throttle gate closed, by class and reason (429, quota-exhausted: a provider quota header at 0).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"class", "reason"}),
		Coalesced: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: metricsSubsystem, Name: "coalesced_requests_total",
			Help:           "GET requests answered by an identical request already in flight, by resource type.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"resource_type"}),
		CacheLists: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: metricsSubsystem, Name: "cache_refreshes_total",
			Help:           "List-based cache refreshes, by cache and reason (miss, expired, invalidated).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"cache", "reason"}),
		GateWaiting: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Subsystem: metricsSubsystem, Name: "gate_waiting_requests",
			Help:           "Requests held at the throttle gate now, by class (read, write, delete).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"class"}),
		GateRemaining: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Subsystem: metricsSubsystem, Name: "gate_estimated_remaining",
			Help:           "The throttle gate's estimate of the tokens left in ARM's bucket after the requests in flight, by subscription and class.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subscription", "class"}),
		GateRefill: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Subsystem: metricsSubsystem, Name: "gate_refill_per_second",
			Help:           "The refill rate of ARM's bucket the throttle gate paces held requests by (learnt from the headers, or assumed), by subscription and class.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subscription", "class"}),
	}
}

func (m *Metrics) collectors() []metrics.Registerable {
	return append([]metrics.Registerable{m.Requests, m.Latency, m.ThrottledSecs, m.ThrottleEvents, m.Coalesced, m.CacheLists,
		m.GateWaiting, m.GateRemaining, m.GateRefill}, m.compatMetrics.collectors()...)
}

func (m *Metrics) addWaiting(c Class, n int) {
	if m == nil {
		return
	}
	m.GateWaiting.WithLabelValues(string(c)).Add(float64(n))
}

func (m *Metrics) setQuota(c Class, subscription string, remaining, refill float64) {
	if m == nil {
		return
	}
	m.GateRemaining.WithLabelValues(subscription, string(c)).Set(remaining)
	m.GateRefill.WithLabelValues(subscription, string(c)).Set(refill)
}

func (m *Metrics) observeThrottled(c Class, d time.Duration) {
	if m == nil || d <= 0 {
		return
	}
	m.ThrottledSecs.WithLabelValues(string(c)).Add(d.Seconds())
}

func (m *Metrics) observeThrottleEvent(c Class, reason string) {
	if m == nil {
		return
	}
	m.ThrottleEvents.WithLabelValues(string(c), reason).Inc()
}

func (m *Metrics) observeCacheRefresh(cache, reason string) {
	if m == nil {
		return
	}
	m.CacheLists.WithLabelValues(cache, reason).Inc()
}

// resultOf buckets a response into a small set of label values.
func resultOf(resp *http.Response, err error) string {
	switch {
	case err != nil && IsThrottled(err):
		return "throttled"
	case err != nil:
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			return "timeout"
		}
		return "error"
	case resp.StatusCode == http.StatusTooManyRequests:
		return "throttled"
	case resp.StatusCode == http.StatusNotFound:
		return "not_found"
	case resp.StatusCode == http.StatusPreconditionFailed:
		return "precondition_failed"
	case resp.StatusCode >= 500:
		return "server_error"
	case resp.StatusCode >= 400:
		return "client_error_" + strconv.Itoa(resp.StatusCode)
	default:
		return "success"
	}
}

// metricsPolicy is a per-retry policy after the gate: it counts what actually goes to ARM.
type metricsPolicy struct{ m *Metrics }

func (p metricsPolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	op := ParseOperation(raw.Method, raw.URL.Path)
	start := time.Now()
	resp, err := req.Next()
	d := time.Since(start)
	p.m.Latency.WithLabelValues(op.Verb, op.ResourceType).Observe(d.Seconds())
	p.m.Requests.WithLabelValues(op.Verb, op.ResourceType, resultOf(resp, err)).Inc()
	p.m.observeAPI(raw, resp, err, d)
	return resp, err
}
