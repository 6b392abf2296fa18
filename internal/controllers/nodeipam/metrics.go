package nodeipam

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	namespace = "azure_ccm"
	subsystem = "node_ipam"
)

// Result values of the assignments metric.
const (
	resultAssigned     = "assigned"
	resultNotAvailable = "cidr_not_available"
	resultError        = "error"
)

var (
	assignments = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "assignments_total", StabilityLevel: metrics.ALPHA,
		Help: "Pod CIDR assignments to nodes, by result (assigned, cidr_not_available, error).",
	}, []string{"result"})
	releases = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "releases_total", StabilityLevel: metrics.ALPHA,
		Help: "Nodes deleted whose pod CIDRs went back to the pool.",
	})
	conflicts = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "conflicts_total", StabilityLevel: metrics.ALPHA,
		Help: "Pod CIDRs found on a node that another node or the service range also holds.",
	})
	cidrsUsed = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "cidrs_used", StabilityLevel: metrics.ALPHA,
		Help: "Node subnets of the cluster CIDR held by nodes (and the service range).",
	}, []string{"cluster_cidr"})
	cidrsCapacity = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "cidrs_capacity", StabilityLevel: metrics.ALPHA,
		Help: "Node subnets in the cluster CIDR.",
	}, []string{"cluster_cidr"})
	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(assignments, releases, conflicts, cidrsUsed, cidrsCapacity) })
}
