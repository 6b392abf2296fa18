package poolmigration

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Results of a run (the result label of runs_total).
const (
	ResultNotNeeded = "not_needed"
	ResultSuccess   = "success"
	ResultFailed    = "failed"
)

var (
	runs = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "azure_ccm", Subsystem: "pool_migration", Name: "runs_total", StabilityLevel: metrics.ALPHA,
		Help: "NIC-based to IP-based backend pool migration runs (one per CCM start with nodeIP pools) by result: not_needed, success, failed.",
	}, []string{"result"})
	steps = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "azure_ccm", Subsystem: "pool_migration", Name: "steps_total", StabilityLevel: metrics.ALPHA,
		Help: "Steps of the NIC-based to IP-based backend pool migration by phase (stage, migrate-api, detach-models, detach-nodes, finish) and result (success, error).",
	}, []string{"phase", "result"})

	registerOnce sync.Once
)

// RegisterMetrics adds the migration metrics to the legacy registry served on /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(runs, steps)
	})
}
