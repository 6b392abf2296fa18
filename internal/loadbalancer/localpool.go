package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// Dedicated backend pools of externalTrafficPolicy: Local services (seed 004). With several
// load balancers such a service's rules point at a pool named after it, holding only the nodes
// that run its ready endpoints. The service reconcile creates, fills and deletes the pool; the
// Local pool updater (package localpools) refills it when endpoints change. Both write through
// the same pool writer, so they never race.

// EndpointNodesFunc names the nodes hosting ready endpoints of a service; ok is false while
// that is not known (informers not synced), and then every eligible node is used.
type EndpointNodesFunc func(namespace, name string) (nodes []string, ok bool)

type atomicEndpointNodes struct {
	mu sync.RWMutex
	f  EndpointNodesFunc
}

func (a *atomicEndpointNodes) get(namespace, name string) ([]string, bool) {
	a.mu.RLock()
	f := a.f
	a.mu.RUnlock()
	if f == nil {
		return nil, false
	}
	return f(namespace, name)
}

// SetEndpointNodes installs the endpoint lookup of the Local pool updater.
func (l *LoadBalancer) SetEndpointNodes(f EndpointNodesFunc) {
	l.endpointNodes.mu.Lock()
	l.endpointNodes.f = f
	l.endpointNodes.mu.Unlock()
}

// LocalPoolResult says what a Local pool sync did.
type LocalPoolResult string

// Results of SyncLocalPool.
const (
	LocalPoolUpdated   LocalPoolResult = "updated"
	LocalPoolUnchanged LocalPoolResult = "unchanged"
	// LocalPoolSkipped: the service has no dedicated pool (not Local, one load balancer, or
	// not reconciled yet); the service reconcile owns it.
	LocalPoolSkipped LocalPoolResult = "skipped"
)

// SyncLocalPool writes the dedicated pools of a Local service: the full desired member set
// (eligible nodes hosting its ready endpoints), diffed against the pool as Azure has it now.
// It is the Local pool updater's entry point.
func (l *LoadBalancer) SyncLocalPool(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (LocalPoolResult, error) {
	if l.multi == nil || svc.DeletionTimestamp != nil || !ours(svc) {
		return LocalPoolSkipped, nil
	}
	s := lenient(svc)
	if !s.IsLocal() {
		return LocalPoolSkipped, nil
	}
	s.LocalPool = true
	name, err := l.locate(ctx, clusterName, s.LBName(), s.Opts.Internal)
	if err != nil || name == "" {
		return LocalPoolSkipped, err
	}
	c := l.clusterFor(clusterName, name)
	lb, err := l.lbWriter(c, c.LBName(s.Opts.Internal)).Get(ctx)
	if err != nil {
		return "", fmt.Errorf("load balancer %s: %w", c.LBName(s.Opts.Internal), err)
	}
	return l.syncLocalPool(ctx, c, lb, s, nodes, true)
}

// syncLocalPool fills the service's dedicated pools on lb. fresh re-reads each pool first (the
// updater's level-triggered diff against Azure).
func (l *LoadBalancer) syncLocalPool(ctx context.Context, c *plan.Cluster, lb *armnetwork.LoadBalancer, s *plan.Service, nodes []*v1.Node, fresh bool) (LocalPoolResult, error) {
	b, ok := l.backends.(*nodeIPBackends)
	if !ok {
		return "", errors.New("dedicated Local service pools need loadBalancerBackendPoolConfigurationType nodeIP")
	}
	hosts, known := l.endpointNodes.get(s.Svc.Namespace, s.Svc.Name)
	eligible := b.filter.Eligible(nodes)
	result := LocalPoolUnchanged
	var errs []error
	for _, fam := range s.Families() {
		name := s.PoolName(c, fam)
		if findPool(lb, name) == nil {
			return LocalPoolSkipped, nil
		}
		want := map[string]string{}
		for _, n := range eligible {
			if known && !slices.Contains(hosts, n.Name) {
				continue
			}
			for i, a := range NodeAddresses(n, fam) {
				if i == 0 {
					want[a.String()] = n.Name
				} else {
					want[a.String()] = fmt.Sprintf("%s-%d", n.Name, i)
				}
			}
		}
		id := str(lb.ID) + "/backendAddressPools/" + name
		w := l.pools.For(id)
		if fresh {
			w.Invalidate()
		}
		cur, err := w.Get(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("backend pool %s: %w", name, err))
			continue
		}
		if cur == nil {
			return LocalPoolSkipped, nil
		}
		if samePoolAddresses(cur, want) {
			continue
		}
		if err := b.write(ctx, lb, name, want); err != nil {
			errs = append(errs, fmt.Errorf("backend pool %s: %w", name, err))
			continue
		}
		result = LocalPoolUpdated
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return result, nil
}

func samePoolAddresses(p *armnetwork.BackendAddressPool, want map[string]string) bool {
	have := map[string]bool{}
	if p.Properties != nil {
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			if a.Properties == nil || a.Properties.IPAddress == nil {
				return false
			}
			have[*a.Properties.IPAddress] = true
		}
	}
	if len(have) != len(want) {
		return false
	}
	for ip := range want {
		if !have[ip] {
			return false
		}
	}
	return true
}

// countLocalSync records a Local pool sync in the metrics.
func countLocalSync(trigger string, res LocalPoolResult, err error) {
	switch {
	case err != nil:
		LocalPoolSyncs.WithLabelValues(trigger, "error").Inc()
	case res != LocalPoolSkipped:
		LocalPoolSyncs.WithLabelValues(trigger, string(res)).Inc()
	}
}
