package loadbalancer

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// EnsureLoadBalancerDeleted removes everything of the service: NSG destinations, frontends,
// rules and probes (and the load balancer when it becomes empty), and its managed public IPs.
//
// It holds the service's lock: a drift audit repairing the service either finished its writes
// before (and they are removed here) or starts after and finds the service gone.
func (l *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	unlock, err := l.locks.lock(ctx, svc.UID)
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	defer unlock()
	return l.deleteService(ctx, clusterName, svc)
}

// deleteService is EnsureLoadBalancerDeleted with the service's lock held (or on a dry-run
// implementation).
func (l *LoadBalancer) deleteService(ctx context.Context, clusterName string, svc *v1.Service) error {
	c := l.cluster(clusterName)
	s := plan.Lenient(svc)
	svcName := s.LBName()
	lbs, err := l.serviceLBs(ctx, clusterName, s)
	if err != nil {
		return err
	}
	// Every group where the service's public IPs may be, not only the one its annotation
	// names now: the annotation may have changed since a public IP was made for it.
	listed, err := l.listFrontendGroups(ctx, s, lbs)
	if err != nil {
		return err
	}
	pipAddrs := plan.PublicIPAddresses(allPIPs(listed))
	var ips []netip.Addr
	for _, lb := range lbs {
		ips = append(ips, plan.ServiceIPs(lb, svcName, pipAddrs)...)
	}
	if l.cfg.SecurityGroupName != "" {
		// The public IPs it is releasing are former addresses too: an interrupted reconcile may
		// have left a rule for one that no frontend and no status shows any more.
		if err := l.ensureSecurity(ctx, c, s, ips, plan.ListedAddresses(plan.BoundPIPs(c, s.Key(), listed)), nil, false); err != nil {
			return err
		}
	}
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{false, true} {
			if err := l.removeFromLB(ctx, c, c.LBName(internal), s, "the service was deleted"); err != nil {
				return err
			}
		}
	}
	for _, p := range plan.BoundPIPs(c, s.Key(), listed) {
		// Detaching the frontend gave the public IP a new ETag: read it again rather than
		// send a DELETE that fails with 412 (a burst of deletions sent almost two deletes
		// per public IP).
		l.pipWriter(p.RG, str(p.PIP.Name)).Invalidate()
		if err := l.releasePIP(ctx, c, s, p.RG, p.PIP); err != nil {
			return err
		}
	}
	return nil
}

// GetLoadBalancer reports the service's status from its frontends; it also reports "exists" when
// only a managed public IP of the service is left (so the controller cleans it up).
func (l *LoadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	c := l.cluster(clusterName)
	s := plan.Lenient(svc)
	lbs, err := l.serviceLBs(ctx, clusterName, s)
	if err != nil {
		return nil, false, err
	}
	listed, err := l.listFrontendGroups(ctx, s, lbs)
	if err != nil {
		return nil, false, err
	}
	pipAddrs := plan.PublicIPAddresses(allPIPs(listed))
	exists := len(plan.BoundPIPs(c, s.Key(), listed)) > 0
	for _, lb := range lbs {
		if ips := plan.ServiceIPs(lb, s.LBName(), pipAddrs); len(ips) > 0 {
			return plan.Status(ips, s.Opts.AdditionalPublicIPs), true, nil
		}
		// A rule or probe left without its frontend's address is still something to delete.
		exists = exists || plan.HasServiceObjects(lb, s.LBName())
	}
	if exists {
		return &v1.LoadBalancerStatus{}, true, nil
	}
	return nil, false, nil
}

// listFrontendGroups lists the public IPs of every group the service's public IPs may be in
// (listServiceGroups), and fails unless it could list the group its annotation names and the
// groups of the public IPs its frontends on lbs use. Without those addresses a frontend looks
// like no load balancer: GetLoadBalancer would report none, the controller would drop the
// finalizer, and a deletion would leave the frontend, its rules and its NSG rules in Azure.
func (l *LoadBalancer) listFrontendGroups(ctx context.Context, s *plan.Service, lbs []*armnetwork.LoadBalancer) ([]plan.ListedPIP, error) {
	must := append([]string{plan.PublicIPResourceGroup(l.cfg, s)}, plan.FrontendPublicIPGroups(lbs, s.LBName())...)
	return l.listServiceGroups(ctx, s, must...)
}

// serviceLBs peeks every load balancer the service may have objects on: both kinds (public
// and internal) of every configuration, its own kind first.
func (l *LoadBalancer) serviceLBs(ctx context.Context, clusterName string, s *plan.Service) ([]*armnetwork.LoadBalancer, error) {
	var out []*armnetwork.LoadBalancer
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{s.Opts.Internal, !s.Opts.Internal} {
			lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
			if err != nil {
				return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			out = append(out, lb)
		}
	}
	return out, nil
}

// releasePIP unbinds the service from a public IP it no longer uses, deleting the public IP
// when it is managed (by its tags) and no other service uses it.
func (l *LoadBalancer) releasePIP(ctx context.Context, c *plan.Cluster, s *plan.Service, rg string, p *armnetwork.PublicIPAddress) error {
	key := s.Key()
	written := l.pipWriting(rg, str(p.Name))
	stored, err := l.pipWriter(rg, str(p.Name)).Submit(ctx, func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
		return plan.UnbindPIP(c, cur, key)
	})
	written(stored, err)
	if err != nil {
		return fmt.Errorf("releasing public IP %s/%s: %w", rg, str(p.Name), err)
	}
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
