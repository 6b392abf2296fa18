package loadbalancer

import (
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/writer"
)

// This file lets the admin-state controller (internal/controllers/adminstate) share the load
// balancer's resource writers, so its pool edits batch with service reconciles and never
// conflict with them.

// PoolWriters is the registry of backend pool writers (one per pool resource ID).
func (l *LoadBalancer) PoolWriters() *writer.Registry[armnetwork.BackendAddressPool] { return l.pools }

// LoadBalancerWriters is the registry of load balancer writers (one per LB resource ID). A pool
// write changes its load balancer's ETag: invalidate that LB writer after writing a pool.
func (l *LoadBalancer) LoadBalancerWriters() *writer.Registry[armnetwork.LoadBalancer] { return l.lbs }

// ClusterLoadBalancerIDs are the resource IDs of every load balancer the cluster may have:
// <prefix> and <prefix>-internal, plus both of each multipleStandardLoadBalancerConfigurations
// entry.
func (l *LoadBalancer) ClusterLoadBalancerIDs(clusterName string) []string {
	c := l.cluster(clusterName)
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if id := c.LBID(name); name != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	add(c.LBName(false))
	add(c.LBName(true))
	for _, m := range l.cfg.MultipleStandardLoadBalancerConfigurations {
		if m.Name != "" {
			add(m.Name)
			add(m.Name + "-internal")
		}
	}
	return out
}

// PoolEntriesHook edits a backend pool model the load balancer is about to write (inside the
// pool writer's mutation), so membership writes keep the admin state of draining nodes: a new
// entry of a draining node is written Down at once instead of None.
type PoolEntriesHook func(pool *armnetwork.BackendAddressPool)

var poolHooks sync.Map // *LoadBalancer -> PoolEntriesHook

// SetPoolEntriesHook installs (nil: removes) the hook of this load balancer implementation.
func (l *LoadBalancer) SetPoolEntriesHook(h PoolEntriesHook) {
	if h == nil {
		poolHooks.Delete(l)
		return
	}
	poolHooks.Store(l, h)
}

// ApplyPoolEntriesHook runs the installed hook on pool (no-op without one). Membership writers
// call it at the end of their pool mutation.
func (l *LoadBalancer) ApplyPoolEntriesHook(pool *armnetwork.BackendAddressPool) {
	if h, ok := poolHooks.Load(l); ok && pool != nil {
		h.(PoolEntriesHook)(pool)
	}
}
