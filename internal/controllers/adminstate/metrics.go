package adminstate

import (
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metric names all start with loadbalancer_adminstate.
const subsystem = "loadbalancer_adminstate"

var (
	// operations counts pool updates: operation is "update_pool" (a GET plus a PUT when
	// something changed) or "taint_node" (PreemptScheduled → draining taint); result is
	// success, unchanged or error.
	operations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "operations_total", StabilityLevel: metrics.ALPHA,
		Help: "Admin-state operations by operation and result.",
	}, []string{"operation", "result"})
	// latency of one operation (ARM or Kubernetes round trips included, gather window excluded).
	latency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "operation_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Latency of admin-state operations.",
		Buckets: metrics.ExponentialBuckets(0.01, 2, 14),
	}, []string{"operation"})
	// transitionLatency is what users care about: from the controller seeing a node's draining
	// taint appear (or go) to every backend entry of the node carrying the new state.
	transitionLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "transition_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Time from observing a node's draining taint change to its backend entries carrying the new admin state.",
		Buckets: metrics.ExponentialBuckets(0.01, 2, 14),
	}, []string{"state"})
	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "errors_total", StabilityLevel: metrics.ALPHA,
		Help: "Failed admin-state operations by operation and HTTP status (0: no response).",
	}, []string{"operation", "status"})
	throttled = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "throttled_total", StabilityLevel: metrics.ALPHA,
		Help: "Admin-state operations that failed because ARM throttled them (429).",
	}, []string{"operation"})
	entriesChanged = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "entries_changed_total", StabilityLevel: metrics.ALPHA,
		Help: "Backend entries whose admin state was changed, by new state.",
	}, []string{"state"})
	drainingNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: subsystem, Name: "draining_nodes", StabilityLevel: metrics.ALPHA,
		Help: "Nodes currently carrying a draining taint.",
	})
	preemptEvents = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "preempt_events_total", StabilityLevel: metrics.ALPHA,
		Help: "PreemptScheduled events by outcome: tainted, duplicate, already_tainted, stale, unknown_node.",
	}, []string{"result"})

	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() {
	registerOnce.Do(func() {
		for _, c := range []metrics.Registerable{operations, latency, transitionLatency, errorsTotal, throttled, entriesChanged, drainingNodes, preemptEvents} {
			legacyregistry.MustRegister(c)
		}
	})
}

// countError records err of operation in the error and throttling series.
func countError(operation string, err error) {
	status := 0
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status = re.StatusCode
		if status == http.StatusTooManyRequests {
			throttled.WithLabelValues(operation).Inc()
		}
	}
	errorsTotal.WithLabelValues(operation, strconv.Itoa(status)).Inc()
}
