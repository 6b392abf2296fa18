package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

// localPoolFreshness: a Local pool flush diffs against the load balancer as read at most this
// long ago. One flush of many services then costs one read per load balancer, not one per pool,
// and still sees changes made behind the CCM's back.
const localPoolFreshness = 2 * time.Second

// errNoLocalPool: the load balancer or the service's dedicated pool is gone (the service
// reconcile recreates it); the sync is skipped.
var errNoLocalPool = errors.New("no dedicated pool")

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
	w := l.lbWriter(c, c.LBName(s.Opts.Internal))
	w.InvalidateOlderThan(localPoolFreshness)
	lb, err := w.Peek(ctx)
	if err != nil {
		return "", fmt.Errorf("load balancer %s: %w", c.LBName(s.Opts.Internal), err)
	}
	return l.syncLocalPool(ctx, c, lb, s, nodes)
}

// syncLocalPool fills the service's dedicated pools (one per IP family) on lb, as read from
// the load balancer's writer. The pools are written inline in a load balancer PUT through that
// writer rather than with the backendAddressPools API: a pool shares its load balancer's ETag,
// so pool PUTs of one load balancer conflict with each other and run one at a time, whereas
// group commit puts every Local pool that changed in a flush (and any other change to the load
// balancer) into one write.
func (l *LoadBalancer) syncLocalPool(ctx context.Context, c *plan.Cluster, lb *armnetwork.LoadBalancer, s *plan.Service, nodes []*v1.Node) (LocalPoolResult, error) {
	b, ok := l.backends.(*nodeIPBackends)
	if !ok {
		return "", errors.New("dedicated Local service pools need loadBalancerBackendPoolConfigurationType nodeIP")
	}
	hosts, known := l.endpointNodes.get(s.Svc.Namespace, s.Svc.Name)
	eligible := b.filter.Eligible(nodes)
	wants := map[string]map[string]string{} // pool name -> address -> address name
	changed := false
	for _, fam := range s.Families() {
		name := s.PoolName(c, fam)
		p := findPool(lb, name)
		if p == nil {
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
		wants[name] = want
		changed = changed || !samePoolAddresses(p, want)
	}
	if !changed {
		return LocalPoolUnchanged, nil
	}
	lbName := c.LBName(s.Opts.Internal)
	var wrote []string
	_, err := l.lbWriter(c, lbName).Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		wrote = wrote[:0]
		for name, want := range wants {
			p := findPool(cur, name)
			if p == nil {
				return nil, errNoLocalPool // an error, not nil: nil would delete the load balancer
			}
			if !samePoolAddresses(p, want) {
				b.setAddresses(p, want)
				wrote = append(wrote, name)
			}
		}
		return cur, nil
	})
	switch {
	case errors.Is(err, errNoLocalPool):
		return LocalPoolSkipped, nil
	case err != nil:
		return "", fmt.Errorf("dedicated backend pools on %s: %w", lbName, err)
	case len(wrote) == 0:
		return LocalPoolUnchanged, nil
	}
	// The pool writers' cached ETags are the load balancer's old one.
	for _, name := range wrote {
		l.pools.For(str(lb.ID) + "/backendAddressPools/" + name).Invalidate()
	}
	return LocalPoolUpdated, nil
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
