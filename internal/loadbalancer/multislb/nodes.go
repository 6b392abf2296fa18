package multislb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// lbPair is one configuration's load balancers as read by a node placement pass.
type lbPair struct {
	c  *plan.Cluster
	lb [2]*armnetwork.LoadBalancer // public, internal; nil when absent
}

// SyncNodes places the nodes on the configured load balancers and makes every existing load
// balancer's cluster pools hold the nodes placed on it. Every service reconcile calls it, so it
// must cost nothing when nothing changed: a call whose inputs (eligible nodes, which load
// balancers exist) are those of the last pass that succeeded returns at once, and calls that
// arrive while a pass runs share the next one instead of each running their own.
func (p *Placer) SyncNodes(ctx context.Context, base *plan.Cluster, all []*v1.Node) error {
	view := p.views.of(all)
	if cached, ok := p.cachedExistence(base); ok && placement.Fingerprint(cached, view.fp) == p.settled.Load() {
		p.passes.count("skipped")
		return nil
	}
	return p.passes.do(ctx, nodePassInput{base: base, nodes: view}, p.placeNodes)
}

// placeNodes is one node placement pass; the pass queue runs one at a time.
func (p *Placer) placeNodes(ctx context.Context, in nodePassInput) (err error) {
	base, eligible := in.base, in.nodes.eligible
	p.settled.Store(0)

	pairs, err := p.readPairs(ctx, base)
	if err != nil {
		return err
	}
	// What this pass saw: a load balancer created while it ran makes the next pass run, so
	// the fingerprint is of the load balancers as read here, not as cached afterwards.
	seen := placement.Fingerprint(existence(pairs), in.nodes.fp)
	defer func() {
		if err == nil {
			p.settled.Store(seen)
		} else {
			klog.V(2).InfoS("Node placement pass failed; the next service reconcile runs another", "err", err)
		}
	}()

	assigned, unplaced := placement.PlaceNodes(p.cfgs, placement.NodeInputs(eligible, p.nodeLB, heldPools(pairs, base.ClusterName), nodeAddresses))
	p.report(eligible, assigned, unplaced)
	p.nodeLB = assigned

	// The load balancers' pools are written concurrently: each has its own writer, and a
	// write waits for the batch its load balancer is busy with.
	var (
		wg   sync.WaitGroup
		errs = make([]error, 2*len(pairs))
	)
	for k, pr := range pairs {
		var mine []*v1.Node
		for _, n := range eligible {
			if assigned[n.Name] == pr.c.LBNamePrefix {
				mine = append(mine, n)
			}
		}
		nodesPerLB.WithLabelValues(pr.c.LBNamePrefix).Set(float64(len(mine)))
		for i, internal := range []bool{false, true} {
			if pr.lb[i] == nil {
				continue
			}
			wg.Add(1)
			go func(slot int, lb *armnetwork.LoadBalancer, name string) {
				defer wg.Done()
				if err := p.o.Pools.SyncEligible(ctx, base.ClusterName, lb, mine); err != nil {
					errs[slot] = fmt.Errorf("backend pools of %s: %w", name, err)
				}
			}(2*k+i, pr.lb[i], pr.c.LBName(internal))
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readPairs reads every configured load balancer (from the writers' caches while fresh).
func (p *Placer) readPairs(ctx context.Context, base *plan.Cluster) ([]lbPair, error) {
	var pairs []lbPair
	for _, c := range p.Clusters(base) {
		pr := lbPair{c: c}
		for i, internal := range []bool{false, true} {
			lb, err := p.writer(c, internal).Peek(ctx)
			if err != nil {
				return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			pr.lb[i] = lb
		}
		pairs = append(pairs, pr)
	}
	return pairs, nil
}

// cachedExistence says from the writers' caches which configured load balancers exist; ok is
// false when one is not cached, so a pass runs (and repairs drift) whenever a cache expires or
// was dropped by a write.
func (p *Placer) cachedExistence(base *plan.Cluster) ([]placement.LBExists, bool) {
	var out []placement.LBExists
	for _, c := range p.Clusters(base) {
		for _, internal := range []bool{false, true} {
			etag, ok := p.writer(c, internal).CachedETag()
			if !ok {
				return nil, false
			}
			out = append(out, placement.LBExists{Name: c.LBName(internal), Exists: etag != ""})
		}
	}
	return out, true
}

func existence(pairs []lbPair) []placement.LBExists {
	var out []placement.LBExists
	for _, pr := range pairs {
		for i, internal := range []bool{false, true} {
			out = append(out, placement.LBExists{Name: pr.c.LBName(internal), Exists: pr.lb[i] != nil})
		}
	}
	return out
}

// heldPools are the addresses each configuration's cluster pools hold now.
func heldPools(pairs []lbPair, clusterName string) []placement.HeldPool {
	var out []placement.HeldPool
	for _, pr := range pairs {
		held := placement.HeldPool{Config: pr.c.LBNamePrefix}
		for _, lb := range pr.lb {
			for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
				pool := backends.FindPool(lb, naming.BackendPoolName(clusterName, fam))
				if pool == nil || pool.Properties == nil {
					continue
				}
				for _, a := range pool.Properties.LoadBalancerBackendAddresses {
					if a.Properties != nil && a.Properties.IPAddress != nil {
						held.Addresses = append(held.Addresses, *a.Properties.IPAddress)
					}
				}
			}
		}
		out = append(out, held)
	}
	return out
}

func nodeAddresses(n *v1.Node) []string {
	var out []string
	for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
		for _, a := range membership.NodeAddresses(n, fam) {
			out = append(out, a.String())
		}
	}
	return out
}

// report raises an event for every node no configuration takes and counts the nodes that move.
func (p *Placer) report(eligible []*v1.Node, assigned map[string]string, unplaced []string) {
	for _, name := range unplaced {
		for _, n := range eligible {
			if n.Name == name {
				p.event(n, v1.EventTypeWarning, ReasonNoLoadBalancerForNode,
					"no multipleStandardLoadBalancerConfigurations entry takes this node (primaryVMSet, nodeSelector): it is in no load balancer's backend pool")
			}
		}
	}
	for n, cfg := range assigned {
		if prev, ok := p.nodeLB[n]; ok && prev != cfg {
			nodeMoves.Inc()
			klog.V(2).InfoS("Node moves to another load balancer", "node", n, "from", prev, "to", cfg)
		}
	}
}
