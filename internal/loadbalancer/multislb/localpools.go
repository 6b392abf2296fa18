package multislb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// Dedicated backend pools of externalTrafficPolicy: Local services. With several load balancers
// such a service's rules point at a pool named after it, holding only the nodes that run its
// ready endpoints. The service reconcile creates, fills and deletes the pool; the Local pool
// updater refills it when endpoints change. Both write it through its load balancer's writer,
// so they never race, and the pools of many services changed in one flush share one write.

// LocalPoolResult says what a Local pool sync did.
type LocalPoolResult string

// Results of SyncLocalPool.
const (
	LocalPoolUpdated   LocalPoolResult = "updated"
	LocalPoolUnchanged LocalPoolResult = "unchanged"
	// LocalPoolSkipped: the service has no dedicated pool (not Local, or not reconciled yet);
	// the service reconcile owns it.
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
func (p *Placer) SyncLocalPool(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (LocalPoolResult, error) {
	if svc.DeletionTimestamp != nil || !plan.ServedHere(svc) {
		return LocalPoolSkipped, nil
	}
	s := plan.Lenient(svc)
	if !s.IsLocal() {
		return LocalPoolSkipped, nil
	}
	s.LocalPool = true
	base := plan.NewCluster(p.o.Config, clusterName, nil)
	name, err := p.Locate(ctx, base, s.LBName(), s.Opts.Internal)
	if err != nil || name == "" {
		return LocalPoolSkipped, err
	}
	c := base.WithPrefix(name)
	w := p.writer(c, s.Opts.Internal)
	w.InvalidateOlderThan(localPoolFreshness)
	lb, err := w.Peek(ctx)
	if err != nil {
		return "", fmt.Errorf("load balancer %s: %w", c.LBName(s.Opts.Internal), err)
	}
	return p.WriteLocalPool(ctx, c, lb, s, nodes)
}

// WriteLocalPool fills the service's dedicated pools (one per IP family) on lb, as read from the
// load balancer's writer. The pools are written inline in a load balancer PUT rather than with
// the backendAddressPools API: group commit then puts every Local pool that changed in a flush
// (and any other change to the load balancer) into one write, where pool PUTs, which share the
// load balancer's ETag, would run one at a time.
func (p *Placer) WriteLocalPool(ctx context.Context, c *plan.Cluster, lb *armnetwork.LoadBalancer, s *plan.Service, nodes []*v1.Node) (LocalPoolResult, error) {
	var hosts []string
	known := false
	if p.o.EndpointNodes != nil {
		hosts, known = p.o.EndpointNodes(s.Svc.Namespace, s.Svc.Name)
	}
	eligible := p.filter.Eligible(nodes)
	wants := map[string]map[string]string{} // pool name -> address -> entry name
	changed := false
	for _, fam := range s.Families() {
		name := s.PoolName(c, fam)
		pool := backends.FindPool(lb, name)
		if pool == nil {
			return LocalPoolSkipped, nil
		}
		want := membership.LocalPoolEntries(eligible, hosts, known, fam)
		wants[name] = want
		changed = changed || !membership.SameAddresses(pool, want)
	}
	if !changed {
		return LocalPoolUnchanged, nil
	}
	lbName := c.LBName(s.Opts.Internal)
	var wrote bool
	_, err := p.writer(c, s.Opts.Internal).Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		wrote = false
		for name, want := range wants {
			pool := backends.FindPool(cur, name)
			if pool == nil {
				return nil, errNoLocalPool // an error, not nil: nil would delete the load balancer
			}
			if !membership.SameAddresses(pool, want) {
				p.o.Pools.SetEntries(pool, want)
				wrote = true
			}
		}
		return cur, nil
	})
	switch {
	case errors.Is(err, errNoLocalPool):
		return LocalPoolSkipped, nil
	case err != nil:
		return "", fmt.Errorf("dedicated backend pools on %s: %w", lbName, err)
	case !wrote:
		return LocalPoolUnchanged, nil
	}
	return LocalPoolUpdated, nil
}

// CountLocalSync records a Local pool write of the service reconcile (trigger reconcile or
// node_sync) in the metrics; the updater's flushes have their own.
func CountLocalSync(trigger string, res LocalPoolResult, err error) {
	switch {
	case err != nil:
		LocalPoolSyncs.WithLabelValues(trigger, "error").Inc()
	case res != LocalPoolSkipped:
		LocalPoolSyncs.WithLabelValues(trigger, string(res)).Inc()
	}
}
