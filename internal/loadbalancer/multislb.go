package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// Multiple Standard load balancers (seed 004): the I/O around the pure planners of package
// placement. The placement of a service is where Azure holds its frontend, the placement of a
// node is the load balancer whose cluster pool holds it: nothing else is recorded, so both
// survive restarts.

// Event reasons of multiple Standard load balancers.
const (
	ReasonLoadBalancerPlaced     = "LoadBalancerPlaced"
	ReasonLoadBalancerMoved      = "LoadBalancerMoved"
	ReasonNoEligibleLoadBalancer = "NoEligibleLoadBalancer"
	ReasonNoLoadBalancerForNode  = "NoLoadBalancerForNode"
	ReasonMultiSLBMisconfigured  = "MultipleLoadBalancersMisconfigured"
)

// LabelAgentPool names a node's agent pool; used as its VM set when the provider ID has no
// scale set (availability-set and Flexible scale set VMs).
const LabelAgentPool = "kubernetes.azure.com/agentpool"

// multiSLB is the state of multiple Standard load balancers.
type multiSLB struct {
	cfgs []placement.Config

	// mu serialises node placement: one placement pass at a time sees and writes every pool.
	mu sync.Mutex
	// nodeLB is the last placement (node name -> configuration), so a node placed on a load
	// balancer that does not exist yet keeps its place until that load balancer is created.
	nodeLB map[string]string
	// settled fingerprints the inputs of the last node placement pass that wrote nothing (0:
	// none); see placementFingerprint.
	settled uint64

	// pendingMu guards pending: the rules of services placed on a load balancer whose write has
	// not landed yet, by pendingKey. Placement counts them too; otherwise every service of a
	// burst would pick the load balancer that had the fewest rules when the burst began.
	pendingMu sync.Mutex
	pending   map[string]int
}

func pendingKey(prefix string, internal bool) string { return fmt.Sprintf("%s/%t", prefix, internal) }

// MultipleLoadBalancers reports whether multipleStandardLoadBalancerConfigurations is in use.
func (l *LoadBalancer) MultipleLoadBalancers() bool { return l.multi != nil }

// ServiceLabelSelectors reports whether a configuration selects services by their labels.
func (l *LoadBalancer) ServiceLabelSelectors() bool {
	if l.multi == nil {
		return false
	}
	for _, c := range l.multi.cfgs {
		if c.ServiceLabels != nil {
			return true
		}
	}
	return false
}

// clusterFor is the cluster settings with the load balancers of configuration name.
func (l *LoadBalancer) clusterFor(clusterName, name string) *plan.Cluster {
	c := l.cluster(clusterName)
	if name != "" {
		c.LBNamePrefix = name
	}
	return c
}

// clusters are the cluster settings of every load balancer pair the cluster may use: one per
// configuration, or the single default pair.
func (l *LoadBalancer) clusters(clusterName string) []*plan.Cluster {
	if l.multi == nil {
		return []*plan.Cluster{l.cluster(clusterName)}
	}
	out := make([]*plan.Cluster, 0, len(l.multi.cfgs))
	for _, cfg := range l.multi.cfgs {
		out = append(out, l.clusterFor(clusterName, cfg.Name))
	}
	return out
}

// locate finds the configuration whose load balancer (of either kind) holds objects of the
// service ("" when none): its current placement.
func (l *LoadBalancer) locate(ctx context.Context, clusterName, svcLBName string, internalFirst bool) (string, error) {
	for _, c := range l.clusters(clusterName) {
		for _, internal := range []bool{internalFirst, !internalFirst} {
			lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
			if err != nil {
				return "", fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			if lb != nil && hasServiceObjects(lb, svcLBName) {
				return c.LBNamePrefix, nil
			}
		}
	}
	return "", nil
}

// placeInput describes a service for the planner.
func (l *LoadBalancer) placeInput(s *plan.Service, current string) placement.Service {
	in := placement.Service{Key: s.Key(), Labels: s.Svc.Labels, Requested: s.Opts.Configurations, Current: current}
	if l.opts.Namespaces != nil {
		if ns, err := l.opts.Namespaces.Get(s.Svc.Namespace); err == nil {
			in.NamespaceLabels = ns.Labels
		}
	}
	return in
}

// placed is the outcome of placing a service.
type placed struct {
	c *plan.Cluster
	// members are the other services sharing the service's frontend, re-applied with it on the
	// target load balancer after a move.
	members []*plan.Service
	// release drops the placement's pending rules once its load balancer write is done.
	release func()
}

// reserve counts rules as pending on a load balancer until the returned release is called.
func (m *multiSLB) reserve(key string, rules int) func() {
	if rules == 0 {
		return func() {}
	}
	m.pending[key] += rules
	var once sync.Once
	return func() {
		once.Do(func() {
			m.pendingMu.Lock()
			defer m.pendingMu.Unlock()
			if m.pending[key] -= rules; m.pending[key] <= 0 {
				delete(m.pending, key)
			}
		})
	}
}

// ruleCount estimates the load balancing rules a service adds: one per port and IP family.
func ruleCount(s *plan.Service) int {
	return max(len(s.Svc.Spec.Ports), 1) * max(len(s.Families()), 1)
}

// placeService chooses the configuration of s (and of the services sharing its frontend),
// moves them there when they must leave their current one, and returns the cluster settings
// of the target. fronts may be edited: an internal service keeps its private address.
func (l *LoadBalancer) placeService(ctx context.Context, clusterName string, s *plan.Service, fronts []plan.Frontend) (*placed, error) {
	internal := s.Opts.Internal
	current, err := l.locate(ctx, clusterName, s.LBName(), internal)
	if err != nil {
		return nil, err
	}
	rules := map[string]int{}
	var holder string
	var shared []*armnetwork.FrontendIPConfiguration
	for _, c := range l.clusters(clusterName) {
		lb, err := l.lbWriter(c, c.LBName(internal)).Peek(ctx)
		if err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		rules[c.LBNamePrefix] = len(lb.Properties.LoadBalancingRules)
		if holder == "" {
			if fes := sharedFrontends(lb, s.LBName(), fronts); len(fes) > 0 {
				holder, shared = c.LBNamePrefix, fes
			}
		}
	}
	if current == "" {
		current = holder
	}
	group := []placement.Service{l.placeInput(s, current)}
	var members []*plan.Service
	if holder != "" {
		members = l.sharingServices(l.clusterFor(clusterName, holder), s, shared)
		for _, m := range members {
			group = append(group, l.placeInput(m, holder))
		}
	}
	l.multi.pendingMu.Lock()
	for _, c := range l.clusters(clusterName) {
		rules[c.LBNamePrefix] += l.multi.pending[pendingKey(c.LBNamePrefix, internal)]
	}
	d, err := placement.PlaceGroup(l.multi.cfgs, group, rules)
	release := func() {}
	if err == nil && (current == "" || d.Moved) {
		n := 0
		for _, m := range append([]*plan.Service{s}, members...) {
			n += ruleCount(m)
		}
		release = l.multi.reserve(pendingKey(d.Name, internal), n)
	}
	l.multi.pendingMu.Unlock()
	if err != nil {
		l.event(s.Svc, v1.EventTypeWarning, ReasonNoEligibleLoadBalancer, err.Error())
		placements.WithLabelValues("no_eligible").Inc()
		return nil, err
	}
	target := l.clusterFor(clusterName, d.Name)
	if !d.Moved {
		if current == "" {
			placements.WithLabelValues("placed").Inc()
			l.event(s.Svc, v1.EventTypeNormal, ReasonLoadBalancerPlaced, fmt.Sprintf("placed on load balancer %s", target.LBName(internal)))
		}
		return &placed{c: target, release: release}, nil
	}
	// Moving: the frontend (public IP or private address) must leave the old load balancer
	// before the new one can carry it, together with every service on it.
	from := l.clusterFor(clusterName, d.From)
	if internal {
		keepPrivateIPs(fronts, shared)
		if len(shared) == 0 {
			old, err := l.lbWriter(from, from.LBName(true)).Peek(ctx)
			if err != nil {
				release()
				return nil, err
			}
			keepPrivateIPs(fronts, plan.ServiceFrontends(old, s.LBName()))
		}
	}
	for _, m := range append([]*plan.Service{s}, members...) {
		for _, in := range []bool{false, true} {
			if err := l.removeFromLB(ctx, from, from.LBName(in), m); err != nil {
				release()
				return nil, fmt.Errorf("moving off %s: %w", from.LBName(in), err)
			}
		}
		moves.Inc()
		l.event(m.Svc, v1.EventTypeNormal, ReasonLoadBalancerMoved, fmt.Sprintf("moved from load balancer %s to %s (no longer eligible there); its IP is kept",
			from.LBName(internal), target.LBName(internal)))
	}
	placements.WithLabelValues("moved").Inc()
	return &placed{c: target, members: members, release: release}, nil
}

// keepPrivateIPs pins internal frontends to the address they have now, so a moved service keeps
// its IP.
func keepPrivateIPs(fronts []plan.Frontend, have []*armnetwork.FrontendIPConfiguration) {
	for i := range fronts {
		if fronts[i].PrivateIP.IsValid() {
			continue
		}
		for _, fe := range have {
			if fe.Properties == nil {
				continue
			}
			if a, ok := addrOf(fe.Properties.PrivateIPAddress); ok && a.Is6() == (fronts[i].Family == naming.IPv6) {
				fronts[i].PrivateIP = a
				break
			}
		}
	}
}

// sharedFrontends are the frontends of lb that carry the IP s asks for (same public IP, same
// private address) and that s does not own: s shares them with other services.
func sharedFrontends(lb *armnetwork.LoadBalancer, svcLBName string, fronts []plan.Frontend) []*armnetwork.FrontendIPConfiguration {
	var out []*armnetwork.FrontendIPConfiguration
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		fp := fe.Properties
		if fp == nil {
			continue
		}
		for _, fr := range fronts {
			pub := fr.PublicIPID != "" && fp.PublicIPAddress != nil && strings.EqualFold(str(fp.PublicIPAddress.ID), fr.PublicIPID)
			priv := fr.PublicIPID == "" && fr.PrivateIP.IsValid() && str(fp.PrivateIPAddress) == fr.PrivateIP.String()
			if pub || priv {
				out = append(out, fe)
				break
			}
		}
	}
	// Frontends the service's own rules use count too (it may hold a shared one already).
	for _, fe := range plan.ServiceFrontends(lb, svcLBName) {
		if !containsFrontend(out, fe) {
			out = append(out, fe)
		}
	}
	return out
}

func containsFrontend(list []*armnetwork.FrontendIPConfiguration, fe *armnetwork.FrontendIPConfiguration) bool {
	for _, x := range list {
		if strings.EqualFold(str(x.Name), str(fe.Name)) {
			return true
		}
	}
	return false
}

// sharingServices are the other Kubernetes services with rules on the given frontends of the
// holder's load balancer. Rules of services the lister does not know (deleted, or not ours)
// stay where they are, and so does their frontend.
func (l *LoadBalancer) sharingServices(c *plan.Cluster, s *plan.Service, fes []*armnetwork.FrontendIPConfiguration) []*plan.Service {
	if l.opts.Services == nil || len(fes) == 0 {
		return nil
	}
	lb, err := l.lbWriter(c, c.LBName(s.Opts.Internal)).Get(context.Background())
	if err != nil || lb == nil || lb.Properties == nil {
		return nil
	}
	names := map[string]bool{}
	for _, fe := range fes {
		names[strings.ToLower(str(fe.Name))] = true
	}
	prefixes := map[string]bool{}
	for _, r := range lb.Properties.LoadBalancingRules {
		if r.Properties == nil || r.Properties.FrontendIPConfiguration == nil {
			continue
		}
		if names[strings.ToLower(lastSegment(str(r.Properties.FrontendIPConfiguration.ID)))] {
			prefixes[strings.ToLower(str(r.Name))] = true
		}
	}
	svcs, err := l.opts.Services.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*plan.Service
	for _, other := range svcs {
		if other.UID == s.Svc.UID || other.Spec.Type != v1.ServiceTypeLoadBalancer || other.DeletionTimestamp != nil || !ours(other) {
			continue
		}
		p := strings.ToLower(naming.ServiceLBName(other.UID))
		for r := range prefixes {
			if strings.HasPrefix(r, p) {
				ps := lenient(other)
				ps.LocalPool = ps.IsLocal()
				out = append(out, ps)
				break
			}
		}
	}
	return out
}

// cleanOtherConfigs removes the service from every load balancer of the other configurations
// (what a move interrupted by a restart may have left).
func (l *LoadBalancer) cleanOtherConfigs(ctx context.Context, clusterName string, keep string, s *plan.Service) error {
	var errs []error
	for _, c := range l.clusters(clusterName) {
		if strings.EqualFold(c.LBNamePrefix, keep) {
			continue
		}
		for _, in := range []bool{false, true} {
			errs = append(errs, l.removeFromLB(ctx, c, c.LBName(in), s))
		}
	}
	return errors.Join(errs...)
}

// syncBackends brings the cluster pools in step with the nodes: of lb alone with one load
// balancer; with several, the nodes are placed (seed 004 rules) and every existing configured
// load balancer gets the nodes placed on it.
func (l *LoadBalancer) syncBackends(ctx context.Context, c *plan.Cluster, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error {
	if l.backends == nil {
		return nil
	}
	if l.multi == nil {
		return l.backends.Sync(ctx, c.ClusterName, lb, nodes)
	}
	return l.placeNodes(ctx, c.ClusterName, nodes)
}

func (l *LoadBalancer) placeNodes(ctx context.Context, clusterName string, all []*v1.Node) (err error) {
	m := l.multi
	m.mu.Lock()
	defer m.mu.Unlock()
	filter := NodeFilter{ExcludeControlPlane: true, ResourceGroup: l.cfg.ResourceGroup}
	eligible := filter.Eligible(all)
	// Every service reconcile comes here; when neither the nodes nor any load balancer changed
	// since the last pass that wrote nothing, this pass would write nothing either.
	fp, known := l.placementFingerprint(clusterName, eligible, l.cachedLBExists)
	if known && fp == m.settled {
		return nil
	}
	m.settled = 0
	// What this pass saw (set below): a load balancer created while it ran must make the next
	// pass run, so the fingerprint is of the load balancers as read here, not as cached later.
	var seen uint64
	defer func() {
		if err == nil && seen != 0 {
			m.settled = seen
		}
	}()

	type pair struct {
		c  *plan.Cluster
		lb [2]*armnetwork.LoadBalancer
	}
	var pairs []pair
	inPool := map[string]string{} // address -> configuration
	for _, c := range l.clusters(clusterName) {
		p := pair{c: c}
		for i, in := range []bool{false, true} {
			lb, err := l.lbWriter(c, c.LBName(in)).Peek(ctx)
			if err != nil {
				return fmt.Errorf("load balancer %s: %w", c.LBName(in), err)
			}
			p.lb[i] = lb
			for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
				if pool := findPool(lb, naming.BackendPoolName(clusterName, fam)); pool != nil && pool.Properties != nil {
					for _, a := range pool.Properties.LoadBalancerBackendAddresses {
						if a.Properties != nil && a.Properties.IPAddress != nil {
							if _, seen := inPool[*a.Properties.IPAddress]; !seen {
								inPool[*a.Properties.IPAddress] = c.LBNamePrefix
							}
						}
					}
				}
			}
		}
		pairs = append(pairs, p)
	}
	seen, _ = l.placementFingerprint(clusterName, eligible, func(c *plan.Cluster, internal bool) (bool, bool) {
		for _, p := range pairs {
			if p.c.LBNamePrefix == c.LBNamePrefix {
				if internal {
					return p.lb[1] != nil, true
				}
				return p.lb[0] != nil, true
			}
		}
		return false, false
	})
	in := make([]placement.Node, 0, len(eligible))
	for _, n := range eligible {
		cur := m.nodeLB[n.Name]
		if cur == "" {
			for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
				for _, a := range NodeAddresses(n, fam) {
					if cfg, ok := inPool[a.String()]; ok && cur == "" {
						cur = cfg
					}
				}
			}
		}
		in = append(in, placement.Node{Name: n.Name, Labels: n.Labels, VMSet: vmSetOf(n), Current: cur})
	}
	assigned, unplaced := placement.PlaceNodes(m.cfgs, in)
	for _, name := range unplaced {
		for _, n := range eligible {
			if n.Name == name {
				l.event(n, v1.EventTypeWarning, ReasonNoLoadBalancerForNode,
					"no multipleStandardLoadBalancerConfigurations entry takes this node (primaryVMSet, nodeSelector): it is in no load balancer's backend pool")
			}
		}
	}
	for n, cfg := range assigned {
		if prev, ok := m.nodeLB[n]; ok && prev != cfg {
			nodeMoves.Inc()
			klog.V(2).InfoS("Node moves to another load balancer", "node", n, "from", prev, "to", cfg)
		}
	}
	m.nodeLB = assigned
	var errs []error
	for _, p := range pairs {
		var mine []*v1.Node
		for _, n := range eligible {
			if assigned[n.Name] == p.c.LBNamePrefix {
				mine = append(mine, n)
			}
		}
		nodesPerLB.WithLabelValues(p.c.LBNamePrefix).Set(float64(len(mine)))
		for i, in := range []bool{false, true} {
			if p.lb[i] == nil {
				continue
			}
			if err := l.backends.Sync(ctx, clusterName, p.lb[i], mine); err != nil {
				errs = append(errs, fmt.Errorf("backend pools of %s: %w", p.c.LBName(in), err))
			}
		}
	}
	return errors.Join(errs...)
}

// cachedLBExists reports, from the load balancer writer's cache, whether the load balancer
// exists; known is false when it is not cached.
func (l *LoadBalancer) cachedLBExists(c *plan.Cluster, internal bool) (exists, known bool) {
	etag, ok := l.lbWriter(c, c.LBName(internal)).CachedETag()
	return etag != "", ok
}

// placementFingerprint hashes what node placement depends on: the eligible nodes (name, scale
// set, labels, addresses) and which configured load balancers exist. Rule changes of a burst
// (new ETags) do not count: they leave the pools alone. known is false when exists does not know
// a load balancer (not in its writer's cache), so a pass runs again, and repairs drift, whenever
// a cache expires or a pool write dropped it.
func (l *LoadBalancer) placementFingerprint(clusterName string, eligible []*v1.Node, exists func(c *plan.Cluster, internal bool) (bool, bool)) (uint64, bool) {
	h := fnv.New64a()
	put := func(ss ...string) {
		for _, s := range ss {
			_, _ = h.Write([]byte(s))
			_, _ = h.Write([]byte{0})
		}
	}
	for _, c := range l.clusters(clusterName) {
		for _, in := range []bool{false, true} {
			ex, ok := exists(c, in)
			if !ok {
				return 0, false
			}
			put(c.LBName(in), strconv.FormatBool(ex))
		}
	}
	// The service controller's node list comes from a lister, in no particular order.
	sorted := slices.Clone(eligible)
	slices.SortFunc(sorted, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range sorted {
		put(n.Name, vmSetOf(n))
		keys := make([]string, 0, len(n.Labels))
		for k := range n.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			put(k, n.Labels[k])
		}
		for _, a := range n.Status.Addresses {
			put(string(a.Type), a.Address)
		}
	}
	return h.Sum64(), true
}

// vmSetOf is the node's scale set (from its provider ID) or, failing that, its agent pool label.
func vmSetOf(n *v1.Node) string {
	if id, err := nodes.ParseProviderID(n.Spec.ProviderID); err == nil && id.ScaleSet != "" {
		return id.ScaleSet
	}
	return n.Labels[LabelAgentPool]
}

// checkMultiSLB reports a configuration without the default <clusterName> entry on the service.
func (l *LoadBalancer) checkMultiSLB(svc *v1.Service, clusterName string) error {
	if err := config.ValidateMultiSLBClusterName(l.cfg, clusterName); err != nil {
		l.event(svc, v1.EventTypeWarning, ReasonMultiSLBMisconfigured, err.Error())
		return err
	}
	return nil
}

// event records an event when a recorder is configured.
func (l *LoadBalancer) event(obj interface{ GetName() string }, typ, reason, msg string) {
	if l.opts.Recorder == nil {
		return
	}
	switch o := obj.(type) {
	case *v1.Service:
		l.opts.Recorder.Event(o, typ, reason, msg)
	case *v1.Node:
		// Node events are recorded against the node's UID-less reference, as kubelet does.
		l.opts.Recorder.Event(&v1.ObjectReference{Kind: "Node", Name: o.Name, UID: o.UID}, typ, reason, msg)
	}
}
