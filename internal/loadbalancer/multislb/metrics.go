package multislb

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of multiple Standard load balancers and Local service pools.
const (
	metricsNamespace = "azure_ccm"
	metricsSubsystem = "multislb"
)

var (
	// placements counts service placement decisions that placed a new service, moved one, found
	// no eligible load balancer, found none with room under maximumLoadBalancerRuleCount,
	// refused a move (its frontend is used by something else too) or refused the
	// configurations annotation with a requested IP.
	placements = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "service_placements_total", StabilityLevel: metrics.ALPHA,
		Help: "Service placement decisions by result (placed, moved, no_eligible, rule_limit, move_refused, conflict).",
	}, []string{"result"})
	// moves counts services moved to another load balancer.
	moves = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "service_moves_total", StabilityLevel: metrics.ALPHA,
		Help: "Services moved to another load balancer because they were no longer eligible on theirs.",
	})
	nodeMoves = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "node_moves_total", StabilityLevel: metrics.ALPHA,
		Help: "Nodes moved to another load balancer's backend pool (label change, configuration change).",
	})
	nodesPerLB = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "nodes", StabilityLevel: metrics.ALPHA,
		Help: "Nodes placed on each configured load balancer.",
	}, []string{"load_balancer"})
	// nodePasses counts the node placement requests of service reconciles by what they cost:
	// skipped (nothing changed since the last pass), joined (shared a pass queued by another),
	// ran or failed (ran a pass that succeeded or failed).
	nodePasses = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "node_passes_total", StabilityLevel: metrics.ALPHA,
		Help: "Node placement requests by result (skipped, joined, ran, failed).",
	}, []string{"result"})
	// LocalPoolSyncs counts writes of Local service pools by trigger (reconcile, node_sync) and
	// result (updated, unchanged, error).
	LocalPoolSyncs = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "local_pool_syncs_total", StabilityLevel: metrics.ALPHA,
		Help: "Dedicated backend pool syncs of externalTrafficPolicy Local services by trigger and result.",
	}, []string{"trigger", "result"})

	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() {
	registerOnce.Do(func() {
		for _, c := range []metrics.Registerable{placements, moves, nodeMoves, nodesPerLB, nodePasses, LocalPoolSyncs} {
			legacyregistry.MustRegister(c)
		}
	})
}
