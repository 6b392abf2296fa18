package pvzones

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "pv_zone_labels"

var (
	syncs = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "syncs_total", StabilityLevel: metrics.ALPHA,
		Help: "PersistentVolumes handled by the pv-zone-labels controller, by result (labelled, unmanaged, skipped, disk_not_found, error).",
	}, []string{"result"})
	syncLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "sync_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Time to label one PersistentVolume (disk GET and PV patch included).",
		Buckets: metrics.ExponentialBuckets(0.01, 2, 12),
	})
	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(syncs, syncLatency) })
}

func observe(result string, d time.Duration) {
	syncs.WithLabelValues(result).Inc()
	syncLatency.Observe(d.Seconds())
}
