package updater

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

const subsystem = "servicegateway"

var (
	pendingOps = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: subsystem, Name: "pending_operations", StabilityLevel: metrics.ALPHA,
		Help: "Work the service gateway updater has not applied yet, by kind (register, locations, unregister, delete).",
	}, []string{"kind"})
	batchSize = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "batch_size", StabilityLevel: metrics.ALPHA,
		Help:    "Items in one service gateway call: services for update_services, addresses for update_address_locations.",
		Buckets: metrics.ExponentialBuckets(1, 2, 14),
	}, []string{"call"})
	callLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "call_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Latency of one updater call to ARM (gateway actions and service resource writes, polling included).",
		Buckets: metrics.ExponentialBuckets(0.01, 2, 14),
	}, []string{"call"})
	calls = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "calls_total", StabilityLevel: metrics.ALPHA,
		Help: "Updater calls to ARM by call and result (success, error).",
	}, []string{"call", "result"})
	callErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "errors_total", StabilityLevel: metrics.ALPHA,
		Help: "Failed updater calls by call and HTTP status (0: no response); every one is retried with backoff.",
	}, []string{"call", "status"})
	syncs = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "syncs_total", StabilityLevel: metrics.ALPHA,
		Help: "Updater passes (one per coalesced burst of cluster changes or retry) by result.",
	}, []string{"result"})
	registerOnce sync.Once
)

// RegisterMetrics adds the updater's metrics to the legacy registry served on /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(pendingOps, batchSize, callLatency, calls, callErrors, syncs)
	})
}

func observeCall(call string, start time.Time, err error) {
	callLatency.WithLabelValues(call).Observe(time.Since(start).Seconds())
	if err != nil {
		calls.WithLabelValues(call, "error").Inc()
		callErrors.WithLabelValues(call, strconv.Itoa(arm.StatusCode(err))).Inc()
		return
	}
	calls.WithLabelValues(call, "success").Inc()
}
