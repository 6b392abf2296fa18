package backends

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/writer"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// NodeIP fills IP-based (nodeIP) pools with node addresses. A pool is written through its load
// balancer's writer as a pool-only change, which goes out as one backendAddressPools PUT (no VM
// or NIC call) unless the same batch changes more of the load balancer.
type NodeIP struct {
	vnetID  string
	filter  membership.NodeFilter
	lbs     *writer.Registry[armnetwork.LoadBalancer]
	entries PoolEntries
	// preConfigured is preConfiguredBackendPoolLoadBalancerTypes.
	preConfigured string
	// last is what was computed from the last node list (nodeIPMemo).
	last *nodeIPMemo
}

// nodeIPMemo holds the pool entries of the last eligible nodes, by their names and internal
// addresses (membership.AddressesKey). Every service reconcile passes the nodes, and each held
// its own 5,000-entry map while its pool change waited for the load balancer's batch: with
// hundreds of workers in a burst that was tens of megabytes. Shared by callers, never modified.
type nodeIPMemo struct {
	seed maphash.Seed

	mu      sync.Mutex
	key     uint64
	entries map[naming.Family]map[string]string
}

// of returns the pool entries of family fam of the nodes with the names and addresses key
// stands for (membership.AddressesKey), from memory when they are those of the last nodes asked
// for; eligible lists those nodes, when they are not.
func (m *nodeIPMemo) of(key uint64, fam naming.Family, eligible func() []*v1.Node) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil || m.key != key {
		m.key, m.entries = key, map[naming.Family]map[string]string{}
	}
	e, ok := m.entries[fam]
	if !ok {
		e = membership.AddressEntries(eligible(), fam)
		m.entries[fam] = e
	}
	return e
}

// NewNodeIP returns the IP-based pool backends; entries may be nil.
func NewNodeIP(cfg *config.Config, ws *writers.Set, entries PoolEntries) *NodeIP {
	return &NodeIP{vnetID: VNetID(cfg), filter: NodeIPFilter(cfg), lbs: ws.LoadBalancers, entries: entries,
		preConfigured: cfg.PreConfiguredBackendPoolLoadBalancerTypes, last: &nodeIPMemo{seed: maphash.MakeSeed()}}
}

// Sync implements Backends.
func (b *NodeIP) Sync(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error {
	if b.last == nil {
		return b.SyncEligible(ctx, clusterName, lb, b.filter.Eligible(nodes))
	}
	// The eligible nodes are listed only when their entries are not remembered: hundreds of
	// reconciles in flight each held a 5,000-node list while waiting for the writer.
	include := func(n *v1.Node) bool { return b.filter.Excluded(n) == "" }
	var key uint64
	keyed := false
	return b.syncWith(ctx, clusterName, lb, func(fam naming.Family) map[string]string {
		if !keyed {
			key, keyed = membership.AddressesKey(b.last.seed, nodes, include), true
		}
		return b.last.of(key, fam, func() []*v1.Node { return b.filter.Eligible(nodes) })
	})
}

// SyncEligible is Sync for nodes already filtered with NodeIPFilter (the placement of multiple
// load balancers filters them once for every pool).
func (b *NodeIP) SyncEligible(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, eligible []*v1.Node) error {
	entries := func(fam naming.Family) map[string]string { return membership.AddressEntries(eligible, fam) }
	if b.last != nil {
		key := membership.AddressesKey(b.last.seed, eligible, nil)
		entries = func(fam naming.Family) map[string]string {
			return b.last.of(key, fam, func() []*v1.Node { return eligible })
		}
	}
	return b.syncWith(ctx, clusterName, lb, entries)
}

// syncWith writes each pool of lb with the entries of its family.
func (b *NodeIP) syncWith(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, entries func(naming.Family) map[string]string) error {
	if lb == nil || PreConfigured(b.preConfigured, str(lb.Name)) {
		return nil
	}
	var errs []error
	for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
		name := naming.BackendPoolName(clusterName, fam)
		pool := FindPool(lb, name)
		if pool == nil {
			continue
		}
		if staging := naming.MigrationPoolName(name); FindPool(lb, staging) != nil {
			// The pool is moving to IP-based membership: its rules use the staging pool, which
			// follows the nodes meanwhile; the pool itself is the migration's.
			name = staging
		} else if pool.Properties != nil && len(pool.Properties.BackendIPConfigurations) > 0 {
			// Still NIC-based: Azure refuses addresses in it until the migration at start-up
			// moved it.
			errs = append(errs, fmt.Errorf("backend pool %s is still NIC-based (nodeIPConfiguration); it moves to IP-based membership at the next CCM start", name))
			continue
		}
		if err := b.write(ctx, lb, name, entries(fam)); err != nil {
			errs = append(errs, fmt.Errorf("backend pool %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Detach implements Backends.
func (b *NodeIP) Detach(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer) error {
	if lb == nil || PreConfigured(b.preConfigured, str(lb.Name)) {
		return nil
	}
	var errs []error
	for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
		name := naming.BackendPoolName(clusterName, fam)
		if p := FindPool(lb, name); p != nil && p.Properties != nil && len(p.Properties.LoadBalancerBackendAddresses) > 0 {
			errs = append(errs, b.write(ctx, lb, name, map[string]string{}))
		}
	}
	return errors.Join(errs...)
}

// write makes pool hold want (address → entry name), keeping the entries of addresses that stay.
func (b *NodeIP) write(ctx context.Context, lb *armnetwork.LoadBalancer, pool string, want map[string]string) error {
	_, err := b.lbs.For(str(lb.ID)).SubmitChild(ctx, pool, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		p := FindPool(cur, pool)
		if p == nil {
			// An error, not nil: nil would delete the load balancer.
			return nil, fmt.Errorf("backend pool %s does not exist", pool)
		}
		b.SetEntries(p, want)
		return cur, nil
	})
	return err
}

// SetEntries edits pool to hold want (address → entry name) and, when that added or removed an
// entry, runs the pool entries hook. A pool whose addresses stay is left as it is: the hook
// gives new entries their node's admin state, and the admin-state controller keeps the existing
// ones; running it anyway would cost a pass over every node for each service of a burst.
func (b *NodeIP) SetEntries(pool *armnetwork.BackendAddressPool, want map[string]string) {
	if membership.SetAddresses(pool, want, b.vnetID) && b.entries != nil {
		b.entries(pool)
	}
}
