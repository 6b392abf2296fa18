package localpools

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	flushes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "azure_ccm", Subsystem: "multislb", Name: "local_pool_flushes_total", StabilityLevel: metrics.ALPHA,
		Help: "Local service pools flushed by the updater, by result (updated, unchanged, skipped, error).",
	}, []string{"result"})
	flushDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "azure_ccm", Subsystem: "multislb", Name: "local_pool_flush_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Duration of one flush of the Local service pool updater (all due pools).",
		Buckets: metrics.ExponentialBuckets(0.01, 2, 14),
	})
	pendingPools = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "azure_ccm", Subsystem: "multislb", Name: "local_pools_pending", StabilityLevel: metrics.ALPHA,
		Help: "Local service pools waiting for the next flush (changed endpoints or failed writes).",
	})

	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() {
	registerOnce.Do(func() {
		for _, c := range []metrics.Registerable{flushes, flushDuration, pendingPools} {
			legacyregistry.MustRegister(c)
		}
	})
}
