package driftaudit

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metric names all start with azure_ccm_drift.
const (
	namespace = "azure_ccm"
	subsystem = "drift"
)

var (
	passes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "audit_passes_total", StabilityLevel: metrics.ALPHA,
		Help: "Drift audit passes by result: in_step (every service planned, none drifted), drift (some drifted, or public IPs no service uses were released), unchanged (nothing moved since the last pass in step: nothing planned), error.",
	}, []string{"result"})
	passDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "audit_pass_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help:    "Duration of one drift audit pass (Azure reads, planning, repairs).",
		Buckets: metrics.ExponentialBuckets(0.01, 2, 16),
	})
	lastPass = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "audit_last_pass_timestamp_seconds", StabilityLevel: metrics.ALPHA,
		Help: "Unix time the last drift audit pass ended.",
	})
	services = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "audit_services_total", StabilityLevel: metrics.ALPHA,
		Help: "Services audited by result: in_step, repaired, skipped (gone or changed before the repair), error.",
	}, []string{"result"})
	driftFound = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "found_total", StabilityLevel: metrics.ALPHA,
		Help: "Azure objects found drifted from their service, by kind (frontend, rule, probe, pool_member, nsg_rule, public_ip, route, other).",
	}, []string{"kind"})
	driftRepaired = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "repaired_total", StabilityLevel: metrics.ALPHA,
		Help: "Azure objects the drift audit repaired, by kind.",
	}, []string{"kind"})

	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() {
	registerOnce.Do(func() {
		for _, c := range []metrics.Registerable{passes, passDuration, lastPass, services, driftFound, driftRepaired} {
			legacyregistry.MustRegister(c)
		}
	})
}
