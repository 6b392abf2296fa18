package migration

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Results of a migration run (the result label of runs_total).
const (
	ResultNotNeeded = "not_needed"
	ResultSuccess   = "success"
	ResultFailed    = "failed"
)

var (
	// runs counts migration runs (one per CCM start with a Standard SKU) by result.
	runs = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "azure_ccm", Subsystem: "lb_migration", Name: "runs_total", StabilityLevel: metrics.ALPHA,
		Help: "Basic to Standard load balancer migration runs by result: not_needed, success, failed.",
	}, []string{"result"})
	// downtime is each service's window between its Basic frontend disappearing (the Basic load
	// balancer deleted) and its Standard frontend and rules being in place.
	downtime = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "azure_ccm", Subsystem: "lb_migration", Name: "service_downtime_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Per service: time from its Basic load balancer being deleted to its Standard load balancer rules existing.",
		Buckets: metrics.ExponentialBuckets(0.05, 2, 14),
	})

	registerOnce sync.Once
)

// RegisterMetrics adds the migration metrics to the legacy registry served on /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(runs, downtime)
	})
}
