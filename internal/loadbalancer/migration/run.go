package migration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Event reasons (on each migrated Service).
const (
	ReasonMigrating      = "MigratingToStandardLoadBalancer"
	ReasonMigrated       = "MigratedToStandardLoadBalancer"
	ReasonFailed         = "MigrationToStandardLoadBalancerFailed"
	ReasonIPChanged      = "MigrationChangedServiceIP"
	ReasonNoOutboundRule = "StandardLoadBalancerHasNoOutboundRule"
	ReasonWarning        = "MigrationWarning"
)

// Options wire the executor. Config, ClusterName, Network, Compute, Writers, Kube and
// LoadBalancer are required.
type Options struct {
	Config      *config.Config
	ClusterName string
	// Network and Compute are the client factories the migration lists Azure with.
	Network *armnetwork.ClientFactory
	Compute *armcompute.ClientFactory
	// Writers are the provider's writers: every step writes through the resource's writer, the
	// one the Standard path uses too.
	Writers *writers.Set
	Kube    kubernetes.Interface
	// NodeSelector is the label selector of the nodes the CCM manages (--node-filter-requirements;
	// "" for all): the nodes listed are those the service controller puts in backend pools.
	NodeSelector string
	// Recorder receives the progress events on the services (optional).
	Recorder record.EventRecorder
	// LoadBalancer is the Standard path the services are handed to.
	LoadBalancer cloudprovider.LoadBalancer
	// VMSetOf names the availability set or scale set of a node (optional; without it only the
	// <cluster>[-internal] Basic load balancers are recognised, not the per-VM-set ones).
	VMSetOf func(ctx context.Context, n *v1.Node) (string, error)
	// Concurrency bounds the parallel writes of one phase (default 10).
	Concurrency int
	// Attempts bounds the plan-and-execute rounds (default 8), with exponential Backoff between
	// them (default 2s, at most 1m).
	Attempts int
	Backoff  time.Duration
	// AfterPhase is called after a phase completed (tests use it to crash on purpose).
	AfterPhase func(Phase)
}

// Result reports a run.
type Result struct {
	Outcome string
	// BasicLBs deleted, PublicIPs upgraded, NodeWrites (NICs, scale set VMs and models) and
	// Services handed off over the run.
	BasicLBs, PublicIPs, NodeWrites, Services int
	// Downtime per service key: Basic load balancer deleted → Standard rules in place.
	Downtime map[string]time.Duration
	Duration time.Duration
	// Warnings of the last plan.
	Warnings []string
}

// Run migrates if the configured SKU is Standard and the cluster still has Basic load
// balancers (or a migration was interrupted). It is meant to run once per CCM start, before
// service reconciles: it re-reads Azure and re-plans after every failure, so a crash or error at
// any step resumes where Azure says it stopped.
func Run(ctx context.Context, o Options) (Result, error) {
	RegisterMetrics()
	start := time.Now()
	res := Result{Outcome: ResultNotNeeded, Downtime: map[string]time.Duration{}}
	if o.Config == nil || !o.Config.IsStandardSKU() {
		return res, nil
	}
	if o.Network == nil || o.Compute == nil || o.Writers == nil || o.Kube == nil || o.LoadBalancer == nil {
		return res, errors.New("migration: Network, Compute, Writers, Kube and LoadBalancer are required")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 10
	}
	if o.Attempts <= 0 {
		o.Attempts = 8
	}
	if o.Backoff <= 0 {
		o.Backoff = 2 * time.Second
	}
	x := &executor{o: o, res: &res, announced: map[string]bool{}, deletedAt: map[string]time.Time{}, unfinished: map[string]*ServicePlan{}}
	delay := o.Backoff
	var lastErr error
	for attempt := 1; ; attempt++ {
		in, nodes, err := x.read(ctx)
		var p *Plan
		if err == nil {
			p = Build(in)
			res.Warnings = p.Warnings
			if !p.Needed() {
				// A hand-off that failed after its frontend landed leaves nothing for the
				// planner to see (the nodes may not have joined yet): it is redone until the
				// Standard path succeeds once.
				p = x.retryHandOffs(in)
			}
			if !p.Needed() {
				if attempt == 1 {
					runs.WithLabelValues(ResultNotNeeded).Inc()
					klog.V(2).InfoS("Basic to Standard load balancer migration: nothing to migrate")
					return res, nil
				}
				break
			}
			err = x.execute(ctx, p, nodes, attempt)
			if err == nil {
				continue // re-plan: the next round must find nothing left
			}
		}
		lastErr = err
		klog.ErrorS(err, "Basic to Standard load balancer migration step failed; re-planning", "attempt", attempt, "retryIn", delay)
		if p != nil {
			x.eventAll(p, v1.EventTypeWarning, ReasonFailed, fmt.Sprintf("Migration to the Standard load balancer failed (attempt %d, retried): %v", attempt, err))
		}
		if attempt >= o.Attempts {
			res.Outcome, res.Duration = ResultFailed, time.Since(start)
			runs.WithLabelValues(ResultFailed).Inc()
			return res, fmt.Errorf("basic to standard load balancer migration gave up after %d attempts: %w", attempt, lastErr)
		}
		select {
		case <-ctx.Done():
			res.Outcome, res.Duration = ResultFailed, time.Since(start)
			runs.WithLabelValues(ResultFailed).Inc()
			return res, fmt.Errorf("basic to standard load balancer migration: %w (last error: %w)", ctx.Err(), lastErr)
		case <-time.After(delay):
		}
		if delay *= 2; delay > time.Minute {
			delay = time.Minute
		}
	}
	res.Outcome, res.Duration = ResultSuccess, time.Since(start)
	runs.WithLabelValues(ResultSuccess).Inc()
	klog.InfoS("Basic to Standard load balancer migration finished", "basicLoadBalancersDeleted", res.BasicLBs,
		"publicIPsUpgraded", res.PublicIPs, "nodeWrites", res.NodeWrites, "services", res.Services, "duration", res.Duration.Round(time.Millisecond))
	x.checkOutbound(ctx)
	return res, nil
}

type executor struct {
	o   Options
	res *Result
	// announced services got their "migrating" event.
	announced map[string]bool
	mu        sync.Mutex
	// deletedAt: when each Basic load balancer (lower-case ID) was deleted in this run.
	deletedAt map[string]time.Time
	// handed are the services handed off in this run (for the outbound warning).
	handed []*ServicePlan
	// unfinished are hand-offs that failed and have not succeeded since (by service key).
	unfinished map[string]*ServicePlan
}

// read gathers the planner's input: load balancers, services, nodes (their VM sets), public IPs
// of every group the services' IPs may live in, and the scale set models of the node groups.
func (x *executor) read(ctx context.Context) (Input, []*v1.Node, error) {
	cfg := x.o.Config
	in := Input{ClusterName: x.o.ClusterName, LBNamePrefix: cfg.LoadBalancerName}
	var err error
	if in.LoadBalancers, err = listAll(ctx, x.o.Network.NewLoadBalancersClient().NewListPager(cfg.LoadBalancerRG(), nil),
		func(p armnetwork.LoadBalancersClientListResponse) []*armnetwork.LoadBalancer { return p.Value }); err != nil {
		return in, nil, fmt.Errorf("listing load balancers of %s: %w", cfg.LoadBalancerRG(), err)
	}
	svcs, err := x.o.Kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, nil, fmt.Errorf("listing services: %w", err)
	}
	pipRGs := map[string]string{strings.ToLower(cfg.ResourceGroup): cfg.ResourceGroup}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		in.Services = append(in.Services, s)
		if rg := strings.TrimSpace(s.Annotations[annotations.ResourceGroup]); rg != "" {
			pipRGs[strings.ToLower(rg)] = rg
		}
	}
	nodeList, err := x.o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: x.o.NodeSelector})
	if err != nil {
		return in, nil, fmt.Errorf("listing nodes: %w", err)
	}
	// VM sets only matter for Basic load balancers: without any, resolving nodes costs nothing.
	anyBasic := false
	for _, lb := range in.LoadBalancers {
		anyBasic = anyBasic || (lb != nil && isBasic(lb))
	}
	var nodes []*v1.Node
	sets := map[string]bool{}
	for i := range nodeList.Items {
		n := &nodeList.Items[i]
		nodes = append(nodes, n)
		if x.o.VMSetOf == nil || !anyBasic {
			continue
		}
		name, err := x.o.VMSetOf(ctx, n)
		if err != nil {
			klog.V(2).InfoS("Migration: the node's VM set is unknown; a Basic load balancer named after it would be missed", "node", n.Name, "err", err)
			continue
		}
		if name != "" && !sets[strings.ToLower(name)] {
			sets[strings.ToLower(name)] = true
			in.VMSets = append(in.VMSets, name)
		}
	}
	sort.Strings(in.VMSets)
	// Groups of the public IPs and node resources the Basic load balancers reference.
	ssRGs := map[string]string{}
	if len(Build(Input{ClusterName: in.ClusterName, LBNamePrefix: in.LBNamePrefix, VMSets: in.VMSets, LoadBalancers: in.LoadBalancers}).BasicLBs) > 0 {
		ssRGs[strings.ToLower(cfg.ResourceGroup)] = cfg.ResourceGroup
	}
	for _, lb := range in.LoadBalancers {
		if !isBasic(lb) {
			continue
		}
		for _, fe := range frontends(lb) {
			if fe.Properties != nil && fe.Properties.PublicIPAddress != nil {
				if rg := azureid.ResourceGroup(str(fe.Properties.PublicIPAddress.ID)); rg != "" {
					pipRGs[strings.ToLower(rg)] = rg
				}
			}
		}
		for _, bp := range poolsOf(lb) {
			if bp.Properties == nil {
				continue
			}
			for _, r := range bp.Properties.BackendIPConfigurations {
				if ref, err := membership.ParseIPConfigID(str(r.ID)); err == nil && ref.Kind == membership.KindScaleSetVM {
					ssRGs[strings.ToLower(ref.ResourceGroup)] = ref.ResourceGroup
				}
			}
		}
	}
	for _, rg := range sortedValues(pipRGs) {
		ips, err := listAll(ctx, x.o.Network.NewPublicIPAddressesClient().NewListPager(rg, nil),
			func(p armnetwork.PublicIPAddressesClientListResponse) []*armnetwork.PublicIPAddress { return p.Value })
		if err != nil {
			return in, nil, fmt.Errorf("listing public IPs of %s: %w", rg, err)
		}
		in.PublicIPs = append(in.PublicIPs, ips...)
	}
	for _, rg := range sortedValues(ssRGs) {
		sets, err := listAll(ctx, x.o.Compute.NewVirtualMachineScaleSetsClient().NewListPager(rg, nil),
			func(p armcompute.VirtualMachineScaleSetsClientListResponse) []*armcompute.VirtualMachineScaleSet {
				return p.Value
			})
		if err != nil {
			return in, nil, fmt.Errorf("listing scale sets of %s: %w", rg, err)
		}
		in.ScaleSets = append(in.ScaleSets, sets...)
	}
	return in, nodes, nil
}

type pager[R any] interface {
	More() bool
	NextPage(context.Context) (R, error)
}

// listAll reads every page; a missing resource group is an empty list.
func listAll[R any, T any](ctx context.Context, p pager[R], items func(R) []*T) ([]*T, error) {
	var out []*T
	for p.More() {
		page, err := p.NextPage(ctx)
		if arm.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, items(page)...)
	}
	return out, nil
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func (x *executor) event(sp *ServicePlan, typ, reason, msg string) {
	if x.o.Recorder != nil && sp.Svc != nil {
		x.o.Recorder.Event(sp.Svc, typ, reason, msg)
	}
}

func (x *executor) eventAll(p *Plan, typ, reason, msg string) {
	for _, sp := range p.Services {
		x.event(sp, typ, reason, msg)
	}
}

// checkOutbound warns when the Standard public load balancer has no outbound rule: outbound
// connectivity is the operator's job after the migration.
func (x *executor) checkOutbound(ctx context.Context) {
	prefix := x.o.Config.LoadBalancerName
	if prefix == "" {
		prefix = x.o.ClusterName
	}
	resp, err := x.o.Network.NewLoadBalancersClient().Get(ctx, x.o.Config.LoadBalancerRG(), prefix, nil)
	if err != nil && !arm.IsNotFound(err) {
		klog.ErrorS(err, "Migration: could not read the Standard load balancer to check its outbound rules", "loadBalancer", prefix)
		return
	}
	if err == nil && resp.Properties != nil && len(resp.Properties.OutboundRules) > 0 {
		return
	}
	msg := fmt.Sprintf("The Standard load balancer %s has no outbound rule: configure outbound connectivity (outbound rule, NAT gateway or instance public IPs); see docs/migration-basic-to-standard.md", prefix)
	klog.ErrorS(nil, "Standard load balancer without an outbound rule after the migration: configure outbound connectivity", "loadBalancer", prefix)
	for _, sp := range x.handed {
		x.event(sp, v1.EventTypeWarning, ReasonNoOutboundRule, msg)
	}
}

// retryHandOffs plans the unfinished hand-offs again, with the services as they are now
// (a service deleted or no longer of type LoadBalancer meanwhile is dropped).
func (x *executor) retryHandOffs(in Input) *Plan {
	p := &Plan{}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, svc := range in.Services {
		sp := x.unfinished[key(svc)]
		if sp == nil {
			continue
		}
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil || svc.UID != sp.Svc.UID {
			continue
		}
		again := *sp
		again.Svc = svc
		p.Services = append(p.Services, &again)
		p.Steps = append(p.Steps, Step{Phase: PhaseHandOff, Target: sp.Key, Service: &again})
	}
	x.unfinished = map[string]*ServicePlan{}
	return p
}
