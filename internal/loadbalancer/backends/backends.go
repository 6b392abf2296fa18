// Package backends keeps the cluster's backend pools of a load balancer in step with the nodes,
// in the two ways Azure offers: IP-based pools (nodeIP: node addresses, written with the
// load balancer through its writer) and NIC-based pools (nodeIPConfiguration: each node's NIC
// or scale set VM ip configuration references the pool, written through the NIC, scale set VM
// and scale set writers). Which members a pool must have is decided by package membership.
package backends

import (
	"context"
	"errors"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Backends keeps the cluster's backend pools of a load balancer in step with the nodes.
type Backends interface {
	// Sync makes the cluster's pools of lb hold exactly the eligible nodes.
	Sync(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error
	// Detach empties the cluster's pools of lb (before the load balancer is deleted).
	Detach(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer) error
}

// PoolEntries edits a backend pool model about to be written, after its members were set (the
// admin-state planner keeps draining nodes' entries Down, so a new entry of a draining node is
// written Down at once instead of None).
type PoolEntries func(pool *armnetwork.BackendAddressPool)

// Options are what the backends are built from. Config and Writers are required; Nodes and
// Caches for NIC-based pools.
type Options struct {
	Config  *config.Config
	Writers *writers.Set
	// Nodes resolves nodes to their VMs and NIC ip configurations (NIC-based pools).
	Nodes *nodes.Resolver
	// Caches are the node resolver's list caches: dropped after NIC and scale set writes so
	// later lookups are not stale, and used to check scale set models without a GET.
	Caches *arm.Caches
	// PoolEntries, when set, runs on every IP-based pool written (optional).
	PoolEntries PoolEntries
}

// New returns the backends of the configured pool type
// (loadBalancerBackendPoolConfigurationType), or nil for a type whose pools the CCM does not
// fill (podIP: the service-gateway controller's).
func New(o Options) (Backends, error) {
	if o.Config == nil || o.Writers == nil {
		return nil, errors.New("backends: Config and Writers are required")
	}
	switch t := o.Config.LoadBalancerBackendPoolConfigurationType; {
	case strings.EqualFold(t, config.BackendPoolNodeIPConfiguration):
		if o.Nodes == nil {
			return nil, errors.New("backends: nodeIPConfiguration backend pools need the node resolver")
		}
		return newIPConfig(o), nil
	case strings.EqualFold(t, config.BackendPoolNodeIP):
		return NewNodeIP(o.Config, o.Writers, o.PoolEntries), nil
	}
	return nil, nil
}

// NodeIPFilter is the node filter of IP-based pools. Control-plane nodes stay out unless
// excludeMasterFromStandardLB is false (the existing provider leaves them out of IP-based pools
// whatever the key says).
func NodeIPFilter(cfg *config.Config) membership.NodeFilter {
	return membership.NodeFilter{ExcludeControlPlane: cfg.ExcludeMasters(), ResourceGroup: cfg.ResourceGroup}
}

// PreConfigured reports whether the cluster pools of load balancer lbName are managed by
// someone else (azure.json preConfiguredBackendPoolLoadBalancerTypes: internal, external, all):
// their members are then never written.
func PreConfigured(types, lbName string) bool {
	internal := strings.HasSuffix(strings.ToLower(lbName), "-internal")
	switch strings.ToLower(types) {
	case "all":
		return true
	case "internal":
		return internal
	case "external":
		return !internal
	}
	return false
}

// VNetID is the virtual network of IP-based pool entries.
func VNetID(cfg *config.Config) string {
	return azureid.VirtualNetwork(cfg.NetworkSubscriptionID(), cfg.VnetRG(), cfg.VnetName)
}

// FindPool is the backend pool called name on lb (nil when absent).
func FindPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if p != nil && strings.EqualFold(str(p.Name), name) {
			return p
		}
	}
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
