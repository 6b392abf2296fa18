package loadbalancer

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// plsOperations counts private link service operations of service reconciles.
	plsOperations = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "azure_ccm", Subsystem: "private_link_service", Name: "operations_total", StabilityLevel: metrics.ALPHA,
		Help: "Private link service operations of LoadBalancer services by operation (create, update, delete, hand_over, subnet, refused) and result (success, error).",
	}, []string{"operation", "result"})

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(plsOperations) })
}

func countPLS(op string, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	plsOperations.WithLabelValues(op, result).Inc()
}
