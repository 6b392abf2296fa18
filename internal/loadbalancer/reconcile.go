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
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// EnsureLoadBalancer reconciles the service's whole Azure state and returns its status.
func (l *LoadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if !plan.ServedHere(svc) {
		return nil, cloudprovider.ImplementedElsewhere
	}
	unlock, err := l.locks.lock(ctx, svc.UID)
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	defer unlock()
	return l.ensureService(ctx, clusterName, svc, nodes)
}

// ensureService is EnsureLoadBalancer with the service's lock held (or on a dry-run
// implementation, where nothing is written).
func (l *LoadBalancer) ensureService(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	s, err := l.parse(svc)
	if err != nil {
		return nil, err
	}
	if l.multi != nil {
		if err := l.multi.CheckClusterName(svc, clusterName); err != nil {
			return nil, err
		}
		if err := l.multi.CheckRequest(s); err != nil {
			return nil, fmt.Errorf("service %s: %w", s.Key(), err)
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
// deletion, and a full reconcile there would resurrect the Azure objects of a service whose
// deletion had just finished.
func (l *LoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	if !plan.ServedHere(svc) {
		return cloudprovider.ImplementedElsewhere
	}
	if svc.DeletionTimestamp != nil {
		return nil
	}
	c, s := l.cluster(clusterName), plan.Lenient(svc)
	if l.multi != nil {
		cfg, err := l.multi.Locate(ctx, c, s.LBName(), s.Opts.Internal)
		if err != nil || cfg == "" {
			return err
		}
		c = c.WithPrefix(cfg)
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
		res, err := l.multi.WriteLocalPool(ctx, c, lb, s, nodes)
		if !l.opts.DryRun {
			multislb.CountLocalSync("node_sync", res, err)
		}
		if err != nil {
			return fmt.Errorf("service %s: %w", s.Key(), err)
		}
	}
	if s.Opts.DisableFloatingIP && l.cfg.SecurityGroupName != "" {
		pipAddrs := map[string]netip.Addr{}
		if !s.Opts.Internal {
			existing, err := l.listPIPs(ctx, plan.PublicIPResourceGroup(l.cfg, s))
			if err != nil {
				return fmt.Errorf("service %s: %w", s.Key(), err)
			}
			pipAddrs = plan.PublicIPAddresses(existing)
		}
		if err := l.ensureSecurity(ctx, c, s, plan.ServiceIPs(lb, s.LBName(), pipAddrs), nil, nodes, true); err != nil {
			return fmt.Errorf("service %s: %w", s.Key(), err)
		}
	}
	return nil
}

// frontends resolves what each IP family of the service needs on the load balancer: its public
// IP (created or updated as planned) or, internal, its subnet and requested address. It
// returns the public IPs listed in every group where the service's public IPs may be (for the
// release of those it no longer uses, wherever its resource-group annotation pointed before),
// the plans, and the public addresses by lower-cased public IP ID.
func (l *LoadBalancer) frontends(ctx context.Context, c *plan.Cluster, s *plan.Service) ([]plan.Frontend, []plan.ListedPIP, []plan.PublicIPPlan, map[string]netip.Addr, error) {
	pipRG := plan.PublicIPResourceGroup(l.cfg, s)
	listed, err := l.listServiceGroups(ctx, s, pipRG)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	pipAddrs := map[string]netip.Addr{}
	var fronts []plan.Frontend
	if s.Opts.Internal {
		for _, f := range s.Families() {
			fr := plan.Frontend{Family: f, SubnetID: plan.SubnetID(l.cfg, s), PrivateIP: s.Opts.IPv4}
			if f == naming.IPv6 {
				fr.PrivateIP = s.Opts.IPv6
			}
			fronts = append(fronts, fr)
		}
		return fronts, listed, nil, pipAddrs, nil
	}
	existing := pipsIn(listed, pipRG)
	plans, err := plan.PlanPublicIPs(c, s, existing)
	if err != nil {
		// The list is cached and kept current by our own writes only: a public IP the user
		// created since is found by listing again (at most every few seconds).
		fresh, lerr := l.refreshPIPs(ctx, pipRG)
		if lerr != nil {
			return nil, nil, nil, nil, err
		}
		existing = fresh
		if plans, err = plan.PlanPublicIPs(c, s, existing); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	recreated, err := l.recreatePIPs(ctx, c, s, pipRG, plans)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if recreated {
		if existing, err = l.listPIPs(ctx, pipRG); err != nil {
			return nil, nil, nil, nil, err
		}
		if plans, err = plan.PlanPublicIPs(c, s, existing); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	if slices.ContainsFunc(plans, func(p plan.PublicIPPlan) bool { return p.Mutate != nil }) && plan.NeedsRecord(l.cfg, pipRG) {
		// Before a public IP is created or bound there: once the annotation names another
		// group (or the service is gone), the record is what still finds it, also after a
		// restart.
		if err := l.opts.PIPGroups.Add(ctx, pipRG); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	for _, p := range plans {
		stored := p.Existing
		if p.Mutate != nil {
			w := l.pipWriter(pipRG, p.Name)
			// The list this plan came from says what the address is (or that it is missing):
			// no GET before the write, no 404 lookup for a new service.
			w.Seed(p.Existing, pipETag(p.Existing))
			written := l.pipWriting(pipRG, p.Name)
			stored, err = w.Submit(ctx, p.Mutate)
			written(stored, err)
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("public IP %s: %w", p.Name, err)
			}
		}
		if stored == nil || stored.ID == nil {
			return nil, nil, nil, nil, fmt.Errorf("public IP %s has no ID", p.Name)
		}
		fronts = append(fronts, plan.Frontend{Family: p.Family, PublicIPID: *stored.ID})
		for id, a := range plan.PublicIPAddresses([]*armnetwork.PublicIPAddress{stored}) {
			pipAddrs[id] = a
		}
	}
	return fronts, listed, plans, pipAddrs, nil
}

// listServiceGroups lists the public IPs of every group where the service's may be (pipGroups,
// and the must groups); the must groups have to be listed, the others are skipped (and logged)
// when they cannot be.
func (l *LoadBalancer) listServiceGroups(ctx context.Context, s *plan.Service, must ...string) ([]plan.ListedPIP, error) {
	listed, skipped, err := l.listGroups(ctx, l.pipGroups(ctx, s, must...), must)
	if err != nil {
		return nil, err
	}
	if skipped != nil {
		klog.ErrorS(skipped, "Public IPs of the service in other resource groups are released later", "service", s.Key())
	}
	return listed, nil
}

func (l *LoadBalancer) ensure(ctx context.Context, c *plan.Cluster, s *plan.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	admitted, err := l.admitRules(ctx, c, s)
	if err != nil {
		return nil, err
	}
	defer admitted() // on every return; idempotent
	fronts, listed, plans, pipAddrs, err := l.frontends(ctx, c, s)
	if err != nil {
		return nil, err
	}
	release := func() {}
	if l.multi != nil {
		p, err := l.multi.PlaceService(ctx, c, s, fronts)
		if err != nil {
			return nil, l.dropCreatedPIPs(ctx, c, s, plans, err)
		}
		release = p.Release
		defer release() // on every return; idempotent
		defer p.ReleasePrivateLink()
		if p.From != nil {
			if err := l.move(ctx, p, s); err != nil {
				return nil, err
			}
		}
		c = p.Cluster
	}
	lb, err := l.applyService(ctx, c, s, fronts)
	// The rules are on Azure (or not coming): the room check and placement count them from there now.
	release()
	admitted()
	if err != nil {
		return nil, l.dropCreatedPIPs(ctx, c, s, plans, err)
	}
	return l.finish(ctx, c, s, lb, fronts, listed, plans, pipAddrs, nodes)
}

// move takes the service off the load balancers it must leave: the frontend (public IP or
// private address) must leave the old load balancer before the new one can carry it. Placement
// never moves a service whose frontend something else uses there.
func (l *LoadBalancer) move(ctx context.Context, p *multislb.Placement, s *plan.Service) error {
	for _, in := range []bool{false, true} {
		why := fmt.Sprintf("the service moved to load balancer %s; a private link service cannot move with it, so its alias changes and private endpoints must connect to the new one", p.Cluster.LBName(in))
		if err := l.removeFromLB(ctx, p.From, p.From.LBName(in), s, why); err != nil {
			return fmt.Errorf("moving off %s: %w", p.From.LBName(in), err)
		}
	}
	l.multi.Moved(s, p.From, p.Cluster)
	return nil
}

// applyService writes the service's frontends, rules and probes on its load balancer.
func (l *LoadBalancer) applyService(ctx context.Context, c *plan.Cluster, s *plan.Service, fronts []plan.Frontend) (*armnetwork.LoadBalancer, error) {
	name := c.LBName(s.Opts.Internal)
	w := l.lbWriter(c, name)
	apply := func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		before := plan.Rules(cur)
		next, err := plan.ApplyService(cur, c, s, fronts)
		if err != nil {
			return nil, err
		}
		if err := plan.CheckRuleLimit(name, before, plan.Rules(next), plan.MaxRules); err != nil {
			return nil, err
		}
		return next, nil
	}
	// A frontend the service no longer uses (its subnet or IP families changed) goes with this
	// write: its private link service must go first.
	cur, err := w.Peek(ctx)
	if err != nil {
		return nil, fmt.Errorf("load balancer %s: %w", name, err)
	}
	if err := l.releasePrivateLinks(ctx, c, s, cur, apply, "the service's frontend was replaced (its subnet or IP families changed)"); err != nil {
		return nil, err
	}
	lb, err := w.Submit(ctx, apply)
	var full *plan.RuleLimitError
	if errors.As(err, &full) {
		l.warn(s.Svc, multislb.ReasonRuleLimitReached, err.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("load balancer %s: %w", name, err)
	}
	return lb, nil
}

// finish does what follows the load balancer write: nothing of the service left on the other
// load balancers, backend pools, NSG rules, public IPs no longer used; then the status.
func (l *LoadBalancer) finish(ctx context.Context, c *plan.Cluster, s *plan.Service, lb *armnetwork.LoadBalancer, fronts []plan.Frontend,
	listed []plan.ListedPIP, plans []plan.PublicIPPlan, pipAddrs map[string]netip.Addr, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	internal := s.Opts.Internal
	// The service may have switched between internal and public: leave nothing on the other LB.
	if err := l.removeFromLB(ctx, c, c.LBName(!internal), s, "the service switched between internal and public"); err != nil {
		return nil, err
	}
	if l.multi != nil {
		if err := l.cleanOtherConfigs(ctx, c, s); err != nil {
			return nil, err
		}
	}
	if err := l.syncBackends(ctx, c, lb, nodes); err != nil {
		return nil, fmt.Errorf("backend pools of %s: %w", c.LBName(internal), err)
	}
	if s.LocalPool {
		res, err := l.multi.WriteLocalPool(ctx, c, lb, s, nodes)
		if !l.opts.DryRun {
			multislb.CountLocalSync("reconcile", res, err)
		}
		if err != nil {
			return nil, err
		}
	}
	ips := plan.ServiceIPs(lb, s.LBName(), pipAddrs)
	if len(ips) < len(fronts) {
		return nil, fmt.Errorf("load balancer %s: the service's frontend has no IP address yet", c.LBName(internal))
	}
	// Public IPs the service no longer uses (renamed, switched to internal or to a user PIP,
	// or left in the group its resource-group annotation named before).
	releasable := plan.ReleasablePIPs(c, s.Key(), plan.PublicIPResourceGroup(l.cfg, s), listed, plans)
	if err := l.ensureSecurity(ctx, c, s, ips, plan.ListedAddresses(releasable), nodes, true); err != nil {
		return nil, err
	}
	if err := l.ensurePrivateLink(ctx, c, s, lb); err != nil {
		return nil, err
	}
	for _, p := range releasable {
		if err := l.releasePIP(ctx, c, s, p.RG, p.PIP); err != nil {
			return nil, err
		}
	}
	return plan.Status(ips, s.Opts.AdditionalPublicIPs), nil
}

// removeFromLB takes the service off one load balancer, deleting the load balancer when nothing
// is left on it (after emptying its pools).
func (l *LoadBalancer) removeFromLB(ctx context.Context, c *plan.Cluster, lbName string, s *plan.Service, why string) error {
	svcLBName := s.LBName()
	w := l.lbWriter(c, lbName)
	cur, err := w.Peek(ctx)
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", lbName, err)
	}
	if cur == nil || !plan.HasServiceObjects(cur, svcLBName) {
		return nil
	}
	remove := func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
		if cur == nil {
			return nil, nil
		}
		// Edits cur in place; nil only signals "empty".
		plan.RemoveServiceAndPools(cur, c, svcLBName, s.Svc.Namespace, s.Svc.Name)
		return cur, nil
	}
	if err := l.releasePrivateLinks(ctx, c, s, cur, remove, why); err != nil {
		return err
	}
	lb, err := w.Submit(ctx, remove)
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", lbName, err)
	}
	if lb == nil || lb.Properties == nil || len(lb.Properties.FrontendIPConfigurations) > 0 {
		return nil
	}
	// No frontend is left: empty the pools, then delete the load balancer if it is still empty.
	if l.opts.Backends != nil {
		if err := l.opts.Backends.Detach(ctx, c.ClusterName, lb); err != nil {
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

// cleanOtherConfigs removes the service from every load balancer of the other configurations
// (what a move interrupted by a restart may have left).
func (l *LoadBalancer) cleanOtherConfigs(ctx context.Context, keep *plan.Cluster, s *plan.Service) error {
	var errs []error
	for _, c := range l.clusters(keep.ClusterName) {
		if strings.EqualFold(c.LBNamePrefix, keep.LBNamePrefix) {
			continue
		}
		for _, in := range []bool{false, true} {
			errs = append(errs, l.removeFromLB(ctx, c, c.LBName(in), s, "the service left this load balancer configuration"))
		}
	}
	return errors.Join(errs...)
}
