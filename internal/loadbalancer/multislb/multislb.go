// Package multislb runs multiple Standard load balancers (multipleStandardLoadBalancerConfigurations):
// the I/O around the pure planners of package placement. It reads where Azure holds each
// service's frontend and each node's pool membership, decides with placement where services and
// nodes belong, fills each load balancer's cluster pool with the nodes placed on it, and keeps
// the dedicated pools of externalTrafficPolicy: Local services. The placement of a service is
// where Azure holds its frontend, that of a node the load balancer whose cluster pool holds it:
// nothing else is recorded, so both survive restarts.
package multislb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/writer"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Event reasons.
const (
	ReasonLoadBalancerPlaced     = "LoadBalancerPlaced"
	ReasonLoadBalancerMoved      = "LoadBalancerMoved"
	ReasonNoEligibleLoadBalancer = "NoEligibleLoadBalancer"
	ReasonNoLoadBalancerForNode  = "NoLoadBalancerForNode"
	ReasonMultiSLBMisconfigured  = "MultipleLoadBalancersMisconfigured"
	// ReasonRuleLimitReached: no eligible load balancer has room for the service's rules under
	// Azure's limit of rules per Standard load balancer (the same reason as the single load
	// balancer's refusal).
	ReasonRuleLimitReached = "LoadBalancerRuleLimitReached"
	// ReasonConflictingConfiguration: the azure-load-balancer-configurations annotation with a
	// requested IP.
	ReasonConflictingConfiguration = "ConflictingLoadBalancerConfiguration"
	// ReasonMoveRefused: the service is no longer eligible where it is, but something else uses
	// its frontend there (the existing provider's reason for refusing that move).
	ReasonMoveRefused = "DeletingFrontendIPConfiguration"
)

// EndpointNodesFunc names the nodes hosting ready endpoints of a service; ok is false while
// that is not known (informers not synced), and then every eligible node is used.
type EndpointNodesFunc func(namespace, name string) (nodes []string, ok bool)

// Options are what a Placer is built from. Config (with
// multipleStandardLoadBalancerConfigurations), Writers and Pools are required.
type Options struct {
	Config  *config.Config
	Writers *writers.Set
	// Pools fills the cluster pools (IP-based: multiple load balancers need nodeIP pools).
	Pools *backends.NodeIP
	// PrivateLinks lists the private link services (placement keeps a service asking for one
	// off a load balancer that has Azure's maximum already; optional).
	PrivateLinks dryrun.PrivateLinkLists
	// Recorder receives the placement events (optional).
	Recorder record.EventRecorder
	// Namespaces reads namespace labels for serviceNamespaceSelector (optional: without it no
	// namespace selector matches).
	Namespaces corelisters.NamespaceLister
	// EndpointNodes names the nodes of a Local service's ready endpoints (optional: without it,
	// a Local service's pool holds every eligible node).
	EndpointNodes EndpointNodesFunc
	// DryRun: the placer of a dry-run implementation (drift audit, plan); its node passes are
	// not counted in the metrics.
	DryRun bool
}

// Placer places services and nodes on the configured load balancers.
type Placer struct {
	o      Options
	cfgs   []placement.Config
	lbs    *writer.Registry[armnetwork.LoadBalancer]
	filter membership.NodeFilter

	// passes runs the node placement passes one at a time; nodeLB is the passes' alone.
	passes passQueue[nodePassInput]
	views  *nodeViews
	// nodeLB is the last placement (node name -> configuration), so a node placed on a load
	// balancer that does not exist yet keeps its place until that load balancer is created.
	nodeLB map[string]string
	// settled fingerprints the inputs of the last node placement pass that succeeded (0:
	// none); see placement.Fingerprint.
	settled atomic.Uint64

	// pendingMu guards pending: the rules of services placed on a load balancer whose write has
	// not landed yet, by pendingKey. Placement counts them too; otherwise every service of a
	// burst would pick the load balancer that had the fewest rules when the burst began.
	pendingMu sync.Mutex
	pending   map[string]int
	// pendingPLS counts, likewise, the private link services of placed services not created
	// yet, so a burst does not put more than Azure's maximum on one load balancer.
	pendingPLS map[string]int
}

// maxPrivateLinks is Azure's limit of private link services per load balancer.
const maxPrivateLinks = 8

// New returns the placer of the configured load balancers.
func New(o Options) (*Placer, error) {
	if o.Config == nil || o.Writers == nil || o.Pools == nil {
		return nil, errors.New("multislb: Config, Writers and Pools are required")
	}
	cfgs, err := placement.Compile(o.Config.MultipleStandardLoadBalancerConfigurations)
	if err != nil {
		return nil, err
	}
	RegisterMetrics()
	filter := backends.NodeIPFilter(o.Config)
	p := &Placer{o: o, cfgs: cfgs, lbs: o.Writers.LoadBalancers, filter: filter, views: newNodeViews(filter, placement.NodeLabelKeys(cfgs)),
		nodeLB: map[string]string{}, pending: map[string]int{}, pendingPLS: map[string]int{}}
	if !o.DryRun {
		p.passes.observe = func(result string) { nodePasses.WithLabelValues(result).Inc() }
	}
	return p, nil
}

func pendingKey(prefix string, internal bool) string { return fmt.Sprintf("%s/%t", prefix, internal) }

// ServiceLabelSelectors reports whether a configuration selects services by their labels.
func (p *Placer) ServiceLabelSelectors() bool {
	for _, c := range p.cfgs {
		if c.ServiceLabels != nil {
			return true
		}
	}
	return false
}

// Clusters are the cluster settings of every configured load balancer pair.
func (p *Placer) Clusters(base *plan.Cluster) []*plan.Cluster {
	out := make([]*plan.Cluster, 0, len(p.cfgs))
	for _, cfg := range p.cfgs {
		out = append(out, base.WithPrefix(cfg.Name))
	}
	return out
}

func (p *Placer) writer(c *plan.Cluster, internal bool) *writer.Writer[armnetwork.LoadBalancer] {
	return p.lbs.For(c.LBID(c.LBName(internal)))
}

// Locate finds the configuration whose load balancer (of either kind) holds objects of the
// service ("" when none): its current placement.
func (p *Placer) Locate(ctx context.Context, base *plan.Cluster, svcLBName string, internalFirst bool) (string, error) {
	for _, c := range p.Clusters(base) {
		for _, internal := range []bool{internalFirst, !internalFirst} {
			lb, err := p.writer(c, internal).Peek(ctx)
			if err != nil {
				return "", fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
			}
			if lb != nil && plan.HasServiceObjects(lb, svcLBName) {
				return c.LBNamePrefix, nil
			}
		}
	}
	return "", nil
}

// CheckClusterName reports, on the service, a configuration without the default <clusterName>
// entry.
func (p *Placer) CheckClusterName(svc *v1.Service, clusterName string) error {
	if err := config.ValidateMultiSLBClusterName(p.o.Config, clusterName); err != nil {
		p.event(svc, v1.EventTypeWarning, ReasonMultiSLBMisconfigured, err.Error())
		return err
	}
	return nil
}

// CheckRequest refuses, with a Warning on the service, the azure-load-balancer-configurations
// annotation together with a requested IP, before anything of the service is written.
func (p *Placer) CheckRequest(s *plan.Service) error {
	if err := placement.Conflict(p.placeInput(s, "")); err != nil {
		p.event(s.Svc, v1.EventTypeWarning, ReasonConflictingConfiguration, err.Error())
		placements.WithLabelValues("conflict").Inc()
		return err
	}
	return nil
}

// PendingRules counts the rules reserved by placements whose load balancer write has not landed
// (0 once a burst is over).
func (p *Placer) PendingRules() int {
	p.pendingMu.Lock()
	defer p.pendingMu.Unlock()
	n := 0
	for _, r := range p.pending {
		n += r
	}
	return n
}

// Placement is where a service goes.
type Placement struct {
	// Cluster is the cluster settings of the target load balancers.
	Cluster *plan.Cluster
	// From, when set, is the configuration the service must leave first: the frontend (public
	// IP or private address) must leave the old load balancer before the new one can carry it.
	From *plan.Cluster
	// Release drops the placement's pending rules once its load balancer write is done
	// (idempotent).
	Release func()
	// ReleasePrivateLink drops its pending private link service once that is written
	// (idempotent).
	ReleasePrivateLink func()
}

func (p *Placer) placeInput(s *plan.Service, current string) placement.Service {
	o := s.Opts
	in := placement.Service{Key: s.Key(), Labels: s.Svc.Labels, Requested: o.Configurations, Current: current,
		PinsIP: o.IPv4.IsValid() || o.IPv6.IsValid() || o.PIPNameIPv4 != "" || o.PIPNameIPv6 != ""}
	if p.o.Namespaces != nil {
		if ns, err := p.o.Namespaces.Get(s.Svc.Namespace); err == nil {
			in.NamespaceLabels = ns.Labels
		}
	}
	return in
}

// reserve counts n as pending in counts[key] until the returned release is called. The caller
// holds pendingMu.
func (p *Placer) reserve(counts map[string]int, key string, n int) func() {
	if n == 0 {
		return func() {}
	}
	counts[key] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			p.pendingMu.Lock()
			defer p.pendingMu.Unlock()
			if counts[key] -= n; counts[key] <= 0 {
				delete(counts, key)
			}
		})
	}
}

// privateLinks lists the private link services a service asking for one competes with (nil
// when it asks for none, or without the list).
func (p *Placer) privateLinks(ctx context.Context, s *plan.Service) ([]*armnetwork.PrivateLinkService, error) {
	if !s.Opts.PLS.Create || p.o.PrivateLinks == nil {
		return nil, nil
	}
	list, err := p.o.PrivateLinks.Get(ctx, plan.PrivateLinkResourceGroup(p.o.Config, s))
	if err != nil {
		return nil, fmt.Errorf("listing private link services: %w", err)
	}
	return list, nil
}

// privateLinkRoom marks the configurations whose load balancer (of the service's kind) already
// carries Azure's maximum of private link services, counting those of services placed but not
// created yet. The caller holds pendingMu.
func (p *Placer) privateLinkRoom(base *plan.Cluster, s *plan.Service, list []*armnetwork.PrivateLinkService) map[string]string {
	if !s.Opts.PLS.Create {
		return nil
	}
	full := map[string]string{}
	for _, c := range p.Clusters(base) {
		lbName := c.LBName(s.Opts.Internal)
		n := len(plan.PrivateLinksOn(list, c.LBID(lbName))) + p.pendingPLS[pendingKey(c.LBNamePrefix, s.Opts.Internal)]
		if n >= maxPrivateLinks {
			full[c.LBNamePrefix] = fmt.Sprintf("load balancer %s has %d private link services, Azure's maximum", lbName, maxPrivateLinks)
		}
	}
	return full
}

// CheckRoom refuses, before anything of the service is written (its public IP above all), a
// service that no load balancer it may use has room for under Azure's limit of rules. On its
// current load balancer, while still eligible there, its rules replace its own and only growth
// is refused; elsewhere they come on top of the rules there and of the placements whose write
// is under way. It counts the service's own rules only: PlaceService makes the final decision. nil when placement is to refuse the
// service for another reason (PlaceService says why).
func (p *Placer) CheckRoom(ctx context.Context, base *plan.Cluster, s *plan.Service) error {
	internal := s.Opts.Internal
	current, err := p.Locate(ctx, base, s.LBName(), internal)
	if err != nil {
		return err
	}
	eligible, err := placement.Eligible(p.cfgs, p.placeInput(s, current))
	if err != nil {
		return nil //nolint:nilerr // PlaceService refuses the service and says why
	}
	lbs := map[string]*armnetwork.LoadBalancer{}
	for _, n := range eligible {
		c := base.WithPrefix(n)
		lb, err := p.writer(c, internal).Peek(ctx)
		if err != nil {
			return fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
		}
		lbs[n] = lb
	}
	need := plan.RuleCount(s)
	p.pendingMu.Lock()
	if i := slices.IndexFunc(eligible, func(n string) bool { return strings.EqualFold(n, current) }); i >= 0 {
		n := eligible[i]
		_, err = plan.CheckRoom(base.WithPrefix(n).LBName(internal), lbs[n], s.LBName(), p.pending[pendingKey(n, internal)], need, plan.MaxRules)
	} else {
		counts, room := map[string]int{}, false
		for _, n := range eligible {
			counts[n] = plan.Rules(lbs[n]) + p.pending[pendingKey(n, internal)]
			room = room || placement.HasRoom(counts[n], need, plan.MaxRules)
		}
		if !room {
			err = &placement.RuleLimitError{Service: s.Key(), Need: need, Max: plan.MaxRules, Counts: counts, Names: eligible}
		}
	}
	p.pendingMu.Unlock()
	if err != nil {
		p.event(s.Svc, v1.EventTypeWarning, ReasonRuleLimitReached, err.Error())
		placements.WithLabelValues("rule_limit").Inc()
	}
	return err
}

// PlaceService chooses the configuration of s. It writes nothing: when the service must move,
// Placement.From says where it is to be removed from. fronts may be edited: a moved internal
// service keeps its private address.
func (p *Placer) PlaceService(ctx context.Context, base *plan.Cluster, s *plan.Service, fronts []plan.Frontend) (*Placement, error) {
	internal := s.Opts.Internal
	current, err := p.Locate(ctx, base, s.LBName(), internal)
	if err != nil {
		return nil, err
	}
	rules := map[string]int{}
	var holder string
	var holderFEs []*armnetwork.FrontendIPConfiguration
	in := p.placeInput(s, current)
	for _, c := range p.Clusters(base) {
		lb, err := p.writer(c, internal).Peek(ctx)
		if err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", c.LBName(internal), err)
		}
		if strings.EqualFold(c.LBNamePrefix, current) {
			// What else uses the service's frontends where it is (either kind: after a switch
			// public ⇄ internal the old frontend is still there).
			in.SharedFrontend, in.SharedBy = plan.FrontendUsers(lb, s.LBName())
			if in.SharedFrontend == "" {
				other, err := p.writer(c, !internal).Peek(ctx)
				if err != nil {
					return nil, fmt.Errorf("load balancer %s: %w", c.LBName(!internal), err)
				}
				in.SharedFrontend, in.SharedBy = plan.FrontendUsers(other, s.LBName())
			}
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		rules[c.LBNamePrefix] = len(lb.Properties.LoadBalancingRules)
		if holder == "" {
			if fes := plan.SharedFrontends(lb, s.LBName(), fronts); len(fes) > 0 {
				holder, holderFEs = c.LBNamePrefix, fes
			}
		}
	}
	plsList, err := p.privateLinks(ctx, s)
	if err != nil {
		return nil, err
	}
	in.Holder, in.Internal = holder, internal
	need := plan.RuleCount(s)
	p.pendingMu.Lock()
	for _, c := range p.Clusters(base) {
		rules[c.LBNamePrefix] += p.pending[pendingKey(c.LBNamePrefix, internal)]
	}
	in.Full = p.privateLinkRoom(base, s, plsList)
	d, err := placement.Place(p.cfgs, in, rules, placement.RuleLimit{Max: plan.MaxRules, Need: need})
	release, releasePLS := func() {}, func() {}
	if err == nil && (current == "" || d.Moved) {
		release = p.reserve(p.pending, pendingKey(d.Name, internal), need)
		if s.Opts.PLS.Create {
			releasePLS = p.reserve(p.pendingPLS, pendingKey(d.Name, internal), 1)
		}
	}
	p.pendingMu.Unlock()
	var (
		full     *placement.RuleLimitError
		conflict *placement.ConflictError
		refused  *placement.MoveRefusedError
	)
	switch {
	case errors.As(err, &full):
		p.event(s.Svc, v1.EventTypeWarning, ReasonRuleLimitReached, err.Error())
		placements.WithLabelValues("rule_limit").Inc()
		return nil, err
	case errors.As(err, &conflict):
		p.event(s.Svc, v1.EventTypeWarning, ReasonConflictingConfiguration, err.Error())
		placements.WithLabelValues("conflict").Inc()
		return nil, err
	case errors.As(err, &refused):
		p.event(s.Svc, v1.EventTypeWarning, ReasonMoveRefused, err.Error())
		placements.WithLabelValues("move_refused").Inc()
		return nil, err
	case err != nil:
		p.event(s.Svc, v1.EventTypeWarning, ReasonNoEligibleLoadBalancer, err.Error())
		placements.WithLabelValues("no_eligible").Inc()
		return nil, err
	}
	target := base.WithPrefix(d.Name)
	if !d.Moved {
		if current == "" {
			placements.WithLabelValues("placed").Inc()
			p.event(s.Svc, v1.EventTypeNormal, ReasonLoadBalancerPlaced, fmt.Sprintf("placed on load balancer %s", target.LBName(internal)))
		}
		return &Placement{Cluster: target, Release: release, ReleasePrivateLink: releasePLS}, nil
	}
	from := base.WithPrefix(d.From)
	if internal {
		plan.KeepPrivateIPs(fronts, holderFEs)
		old, err := p.writer(from, true).Peek(ctx)
		if err != nil {
			release()
			releasePLS()
			return nil, err
		}
		plan.KeepPrivateIPs(fronts, plan.ServiceFrontends(old, s.LBName()))
	}
	placements.WithLabelValues("moved").Inc()
	return &Placement{Cluster: target, From: from, Release: release, ReleasePrivateLink: releasePLS}, nil
}

// Moved records that a service left from for to.
func (p *Placer) Moved(m *plan.Service, from, to *plan.Cluster) {
	moves.Inc()
	internal := m.Opts.Internal
	p.event(m.Svc, v1.EventTypeNormal, ReasonLoadBalancerMoved, fmt.Sprintf("moved from load balancer %s to %s (no longer eligible there); its IP is kept",
		from.LBName(internal), to.LBName(internal)))
}

// event records an event when a recorder is configured.
func (p *Placer) event(obj interface{ GetName() string }, typ, reason, msg string) {
	if p.o.Recorder == nil {
		return
	}
	switch o := obj.(type) {
	case *v1.Service:
		p.o.Recorder.Event(o, typ, reason, msg)
	case *v1.Node:
		// Node events are recorded against the node's reference, as kubelet does.
		p.o.Recorder.Event(&v1.ObjectReference{Kind: "Node", Name: o.Name, UID: o.UID}, typ, reason, msg)
	}
}
