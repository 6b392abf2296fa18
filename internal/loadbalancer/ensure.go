package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// EnsureLoadBalancer reconciles the service's whole Azure state and returns its status.
func (l *LoadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if !ours(svc) {
		return nil, cloudprovider.ImplementedElsewhere
	}
	s, err := l.parse(svc)
	if err != nil {
		return nil, err
	}
	if l.multi != nil {
		if err := l.checkMultiSLB(svc, clusterName); err != nil {
			return nil, err
		}
		s.LocalPool = s.IsLocal()
	}
	st, err := l.ensure(ctx, l.cluster(clusterName), s, nodes)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", s.Key(), err)
	}
	return st, nil
}

// UpdateLoadBalancer brings the backend pools (and, for services without floating IP, the NSG
// rules that name node addresses) in step with the nodes. It never creates a frontend, rule or
// public IP: the service controller's node sync calls it from a cache that can lag behind a
// deletion, and a full reconcile there resurrected the Azure objects of a service whose
// deletion had just finished (found by the chaos suite).
func (l *LoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	if !ours(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	if svc.DeletionTimestamp != nil {
		return nil
	}
	c, s := l.cluster(clusterName), lenient(svc)
	if l.multi != nil {
		cfg, err := l.locate(ctx, clusterName, s.LBName(), s.Opts.Internal)
		if err != nil || cfg == "" {
			return err
		}
		c = l.clusterFor(clusterName, cfg)
		s.LocalPool = s.IsLocal()
	}
	name := c.LBName(s.Opts.Internal)
	lb, err := l.lbWriter(c, name).Peek(ctx)
	if err != nil {
		return fmt.Errorf("service %s: load balancer %s: %w", s.Key(), name, err)
	}
	if lb == nil || !plan.OwnsFrontend(lb, s.LBName()) {
		// Not (or no longer) served: EnsureLoadBalancer or the deletion owns this service.
		return nil
	}
	if err := l.syncBackends(ctx, c, lb, nodes); err != nil {
		return fmt.Errorf("service %s: backend pools of %s: %w", s.Key(), name, err)
	}
	if s.LocalPool {
		res, err := l.syncLocalPool(ctx, c, lb, s, nodes)
		countLocalSync("node_sync", res, err)
		if err != nil {
			return fmt.Errorf("service %s: %w", s.Key(), err)
		}
	}
	if s.Opts.DisableFloatingIP && l.cfg.SecurityGroupName != "" {
		pipAddrs := map[string]netip.Addr{}
		if !s.Opts.Internal {
			existing, err := l.listPIPs(ctx, l.pipRG(s))
			if err != nil {
				return fmt.Errorf("service %s: %w", s.Key(), err)
			}
			for _, p := range existing {
				if a, ok := plan.PIPAddress(p); ok && p.ID != nil {
					pipAddrs[strings.ToLower(*p.ID)] = a
				}
			}
		}
		if err := l.ensureSecurity(ctx, c, s, serviceIPs(lb, s.LBName(), pipAddrs), nodes, true); err != nil {
			return fmt.Errorf("service %s: %w", s.Key(), err)
		}
	}
	return nil
}

func (l *LoadBalancer) ensure(ctx context.Context, c *plan.Cluster, s *plan.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	internal := s.Opts.Internal
	pipRG := l.pipRG(s)
	var (
		fronts   []plan.Frontend
		pipAddrs = map[string]netip.Addr{} // lower-cased PIP ID -> address
		existing []*armnetwork.PublicIPAddress
		plans    []plan.PublicIPPlan
		err      error
	)
	existing, err = l.listPIPs(ctx, pipRG)
	if err != nil {
		return nil, err
	}
	if !internal {
		if plans, err = plan.PlanPublicIPs(c, s, existing); err != nil {
			// The list is cached and kept current by our own writes only: a public IP the user
			// created since is found by listing again (at most every few seconds).
			fresh, lerr := l.refreshPIPs(ctx, pipRG)
			if lerr != nil {
				return nil, err
			}
			existing = fresh
			if plans, err = plan.PlanPublicIPs(c, s, existing); err != nil {
				return nil, err
			}
		}
		for _, p := range plans {
			stored := p.Existing
			if p.Mutate != nil {
				stored, err = l.pipWriter(pipRG, p.Name).Submit(ctx, p.Mutate)
				l.pipWritten(pipRG, p.Name, stored, err)
				if err != nil {
					return nil, fmt.Errorf("public IP %s: %w", p.Name, err)
				}
			}
			if stored == nil || stored.ID == nil {
				return nil, fmt.Errorf("public IP %s has no ID", p.Name)
			}
			fronts = append(fronts, plan.Frontend{Family: p.Family, PublicIPID: *stored.ID})
			if a, ok := plan.PIPAddress(stored); ok {
				pipAddrs[strings.ToLower(*stored.ID)] = a
			}
		}
	} else {
		for _, f := range s.Families() {
			fr := plan.Frontend{Family: f, SubnetID: l.subnetID(s), PrivateIP: s.Opts.IPv4}
			if f == naming.IPv6 {
				fr.PrivateIP = s.Opts.IPv6
			}
			fronts = append(fronts, fr)
		}
	}

	var members []*plan.Service
	release := func() {}
	if l.multi != nil {
		p, err := l.placeService(ctx, c.ClusterName, s, fronts)
		if err != nil {
			return nil, err
		}
		release = p.release
		defer release() // on every return; idempotent
		c, members = p.c, p.members
	}
	lb, err := l.lbWriter(c, c.LBName(internal)).Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		next, err := plan.ApplyService(cur, c, s, fronts)
		if err != nil {
			return nil, err
		}
		// Services sharing the IP moved with this one: their rules come along.
		for _, m := range members {
			if n, err := plan.ApplyService(next, c, m, fronts); err == nil {
				next = n
			} else {
				klog.ErrorS(err, "Re-applying a service that shares the moved IP", "service", m.Key())
			}
		}
		return next, nil
	})
	release() // the rules are on Azure (or not coming): placement counts them from there now
	if err != nil {
		return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
	}
	// The service may have switched between internal and public: leave nothing on the other LB.
	if err := l.removeFromLB(ctx, c, c.LBName(!internal), s); err != nil {
		return nil, err
	}
	if l.multi != nil {
		if err := l.cleanOtherConfigs(ctx, c.ClusterName, c.LBNamePrefix, s); err != nil {
			return nil, err
		}
	}
	if err := l.syncBackends(ctx, c, lb, nodes); err != nil {
		return nil, fmt.Errorf("backend pools of %s: %w", c.LBName(internal), err)
	}
	if s.LocalPool {
		res, err := l.syncLocalPool(ctx, c, lb, s, nodes)
		countLocalSync("reconcile", res, err)
		if err != nil {
			return nil, err
		}
	}

	ips := serviceIPs(lb, s.LBName(), pipAddrs)
	if len(ips) < len(fronts) {
		return nil, fmt.Errorf("load balancer %s: the service's frontend has no IP address yet", c.LBName(internal))
	}

	if err := l.ensureSecurity(ctx, c, s, ips, nodes, true); err != nil {
		return nil, err
	}
	// Public IPs the service no longer uses (renamed, switched to internal or to a user PIP).
	for _, p := range plan.ReleasablePIPs(c, s.Key(), existing, plans) {
		if err := l.releasePIP(ctx, c, s, pipRG, p); err != nil {
			return nil, err
		}
	}
	return statusOf(ips, s.Opts.AdditionalPublicIPs), nil
}

// ensureSecurity patches (want) or cleans the NSG for the service.
func (l *LoadBalancer) ensureSecurity(ctx context.Context, c *plan.Cluster, s *plan.Service, ips []netip.Addr, nodes []*v1.Node, want bool) error {
	if l.cfg.SecurityGroupName == "" {
		return errors.New("azure.json securityGroupName is required for LoadBalancer services")
	}
	dsts := slices.Clone(ips)
	if want {
		dsts = append(dsts, s.Opts.AdditionalPublicIPs...)
	}
	if s.Opts.DisableFloatingIP {
		dsts = nil
		f := NodeFilter{ExcludeControlPlane: l.cfg.ExcludeMasters(), ResourceGroup: l.cfg.ResourceGroup}
		for _, n := range f.Eligible(nodes) {
			dsts = append(dsts, NodeAddresses(n, naming.IPv4)...)
			dsts = append(dsts, NodeAddresses(n, naming.IPv6)...)
		}
	}
	var stale []netip.Addr
	for _, ing := range s.Svc.Status.LoadBalancer.Ingress {
		if a, ok := addrOf(&ing.IP); ok && !slices.Contains(dsts, a) {
			stale = append(stale, a)
		}
	}
	if len(stale) > 0 {
		inUse, err := l.addressesOfOthers(ctx, c, s)
		if err != nil {
			return err
		}
		stale = slices.DeleteFunc(stale, func(a netip.Addr) bool { return inUse[a] })
	}
	in := plan.SecurityInput{Service: s, Want: want, Destinations: dsts, Stale: stale, RetainPorts: l.retainPorts(s, append(slices.Clone(dsts), stale...))}
	_, err := l.nsgWriter().Submit(ctx, func(cur *armnetwork.SecurityGroup) (*armnetwork.SecurityGroup, error) {
		return plan.ApplySecurity(cur, in)
	})
	if err != nil {
		return fmt.Errorf("network security group %s: %w", l.cfg.SecurityGroupName, err)
	}
	return nil
}

// addressesOfOthers are the frontend addresses other services hold on the cluster's load
// balancers or show in their status. A deleted internal service's private address goes to the
// next internal service that asks, so an address from an old status must be left alone once
// someone else holds it: cleaning it removed the new owner's NSG rules (found by the chaos suite).
func (l *LoadBalancer) addressesOfOthers(ctx context.Context, c *plan.Cluster, s *plan.Service) (map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	for _, c := range l.clusters(c.ClusterName) {
		for _, internal := range []bool{false, true} {
			lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
			if err != nil {
				return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			if lb == nil || lb.Properties == nil {
				continue
			}
			for _, fe := range lb.Properties.FrontendIPConfigurations {
				if fe.Properties == nil || naming.OwnedByService(s.LBName(), str(fe.Name)) {
					continue
				}
				if a, ok := addrOf(fe.Properties.PrivateIPAddress); ok {
					out[a] = true
				}
			}
		}
	}
	if l.opts.Services != nil {
		svcs, err := l.opts.Services.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing services: %w", err)
		}
		for _, other := range svcs {
			if other.UID == s.Svc.UID {
				continue
			}
			for _, ing := range other.Status.LoadBalancer.Ingress {
				if a, ok := addrOf(&ing.IP); ok {
					out[a] = true
				}
			}
		}
	}
	return out, nil
}

// removeFromLB takes the service off one load balancer, deleting the load balancer when nothing
// is left on it (after emptying its pools).
func (l *LoadBalancer) removeFromLB(ctx context.Context, c *plan.Cluster, lbName string, s *plan.Service) error {
	svcLBName := s.LBName()
	w := l.lbWriter(c, lbName)
	cur, err := w.Peek(ctx)
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", lbName, err)
	}
	if cur == nil || !hasServiceObjects(cur, svcLBName) {
		return nil
	}
	lb, err := w.Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		if cur == nil {
			return nil, nil
		}
		// Edits cur in place; nil only signals "empty".
		plan.RemoveServiceAndPools(cur, c, svcLBName, s.Svc.Namespace, s.Svc.Name)
		return cur, nil
	})
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", lbName, err)
	}
	if lb == nil || lb.Properties == nil || len(lb.Properties.FrontendIPConfigurations) > 0 {
		return nil
	}
	// No frontend is left: empty the pools, then delete the load balancer if it is still empty.
	if l.backends != nil {
		if err := l.backends.Detach(ctx, c.ClusterName, lb); err != nil {
			return fmt.Errorf("emptying backend pools of %s: %w", lbName, err)
		}
	}
	_, err = w.Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		if cur == nil || (cur.Properties != nil && len(cur.Properties.FrontendIPConfigurations) > 0) {
			return cur, nil
		}
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("deleting load balancer %s: %w", lbName, err)
	}
	klog.V(2).InfoS("Deleted empty load balancer", "loadBalancer", lbName)
	return nil
}

func hasServiceObjects(lb *armnetwork.LoadBalancer, svcLBName string) bool {
	if plan.OwnsFrontend(lb, svcLBName) {
		return true
	}
	if lb.Properties != nil {
		for _, p := range lb.Properties.Probes {
			if naming.OwnedByService(svcLBName, str(p.Name)) {
				return true
			}
		}
	}
	return false
}

func (l *LoadBalancer) releasePIP(ctx context.Context, c *plan.Cluster, s *plan.Service, rg string, p *armnetwork.PublicIPAddress) error {
	deletable := !plan.UserChosen(s, p)
	key := s.Key()
	stored, err := l.pipWriter(rg, str(p.Name)).Submit(ctx, func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
		return plan.UnbindPIP(c, cur, key, deletable)
	})
	l.pipWritten(rg, str(p.Name), stored, err)
	if err != nil {
		return fmt.Errorf("releasing public IP %s: %w", str(p.Name), err)
	}
	return nil
}

// serviceIPs are the addresses of the service's frontends on lb.
func serviceIPs(lb *armnetwork.LoadBalancer, svcLBName string, pipAddrs map[string]netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, fe := range plan.ServiceFrontends(lb, svcLBName) {
		p := fe.Properties
		if p == nil {
			continue
		}
		if p.PublicIPAddress != nil {
			if a, ok := pipAddrs[strings.ToLower(str(p.PublicIPAddress.ID))]; ok {
				out = append(out, a)
			}
			continue
		}
		if a, ok := addrOf(p.PrivateIPAddress); ok {
			out = append(out, a)
		}
	}
	return out
}

func statusOf(ips, extra []netip.Addr) *v1.LoadBalancerStatus {
	st := &v1.LoadBalancerStatus{}
	for _, a := range append(slices.Clone(ips), extra...) {
		st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: a.String()})
	}
	return st
}

// EnsureLoadBalancerDeleted removes everything of the service: NSG destinations, frontends,
// rules and probes (and the load balancer when it becomes empty), and its managed public IPs.
func (l *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	c := l.cluster(clusterName)
	s := lenient(svc)
	svcName := s.LBName()
	pipRG := l.pipRG(s)
	existing, err := l.listPIPs(ctx, pipRG)
	if err != nil {
		return err
	}
	pipAddrs := map[string]netip.Addr{}
	for _, p := range existing {
		if a, ok := plan.PIPAddress(p); ok && p.ID != nil {
			pipAddrs[strings.ToLower(*p.ID)] = a
		}
	}
	var ips []netip.Addr
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{false, true} {
			lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
			if err != nil {
				return fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			ips = append(ips, serviceIPs(lb, svcName, pipAddrs)...)
		}
	}
	if l.cfg.SecurityGroupName != "" {
		if err := l.ensureSecurity(ctx, c, s, ips, nil, false); err != nil {
			return err
		}
	}
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{false, true} {
			if err := l.removeFromLB(ctx, c, c.LBName(internal), s); err != nil {
				return err
			}
		}
	}
	for _, p := range existing {
		if plan.IsManagedPIP(c, p) && slices.Contains(plan.PIPServices(p), s.Key()) {
			// Detaching the frontend gave the public IP a new ETag: read it again rather than
			// send a DELETE that fails with 412 (TestThrottling's delete phase sent 541 deletes
			// for 300 public IPs).
			l.pipWriter(pipRG, str(p.Name)).Invalidate()
			if err := l.releasePIP(ctx, c, s, pipRG, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// GetLoadBalancer reports the service's status from its frontends; it also reports "exists" when
// only a managed public IP of the service is left (so the controller cleans it up).
func (l *LoadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	c := l.cluster(clusterName)
	s := lenient(svc)
	existing, err := l.listPIPs(ctx, l.pipRG(s))
	if err != nil {
		return nil, false, err
	}
	pipAddrs := map[string]netip.Addr{}
	owned := false
	for _, p := range existing {
		if a, ok := plan.PIPAddress(p); ok && p.ID != nil {
			pipAddrs[strings.ToLower(*p.ID)] = a
		}
		if plan.IsManagedPIP(c, p) && slices.Contains(plan.PIPServices(p), s.Key()) {
			owned = true
		}
	}
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{s.Opts.Internal, !s.Opts.Internal} {
			lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
			if err != nil {
				return nil, false, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			if ips := serviceIPs(lb, s.LBName(), pipAddrs); len(ips) > 0 {
				return statusOf(ips, s.Opts.AdditionalPublicIPs), true, nil
			}
		}
	}
	if owned {
		return &v1.LoadBalancerStatus{}, true, nil
	}
	return nil, false, nil
}
