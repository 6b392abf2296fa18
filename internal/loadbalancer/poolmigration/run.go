package poolmigration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Event reasons (on the services of a migrated load balancer).
const (
	ReasonMigrating = "MigratingBackendPoolToIPBased"
	ReasonMigrated  = "MigratedBackendPoolToIPBased"
	ReasonFailed    = "BackendPoolMigrationFailed"
	ReasonWarning   = "BackendPoolMigrationWarning"
)

// Options wire the executor. Config, ClusterName, Writers, Caches, Nodes and Kube are required.
type Options struct {
	Config      *config.Config
	ClusterName string
	// Writers are the provider's writers: every write goes through the resource's writer.
	Writers *writers.Set
	// Caches list NICs, scale sets and their instances' NICs (read fresh every round).
	Caches *arm.Caches
	// Nodes resolves a node to its VM's ip configurations.
	Nodes *nodes.Resolver
	Kube  kubernetes.Interface
	// NodeSelector is the label selector of the nodes the CCM manages (--node-filter-requirements;
	// "" for all): the nodes whose addresses the staging pool holds.
	NodeSelector string
	// Recorder receives the progress events on the services (optional).
	Recorder record.EventRecorder
	// PoolEntries edits every IP-based pool written (the admin state of draining nodes).
	PoolEntries backends.PoolEntries
	// Concurrency bounds the parallel writes of one phase (default 10).
	Concurrency int
	// Attempts bounds the plan-and-execute rounds (default 8), with exponential Backoff between
	// them (default 2s, at most 1m).
	Attempts int
	Backoff  time.Duration
	// APIWait bounds the wait for migrateToIpBased to show in the pools (default 2m).
	APIWait time.Duration
	// AfterPhase is called after a phase completed (tests use it to crash on purpose).
	AfterPhase func(Phase)
}

// Result reports a run.
type Result struct {
	Outcome string
	// Steps run, by phase.
	Steps    map[string]int
	Duration time.Duration
	Warnings []string
}

// Needed reports whether the configuration asks for IP-based pools (the only case the
// migration looks at Azure).
func Needed(cfg *config.Config) bool {
	return cfg != nil && strings.EqualFold(cfg.LoadBalancerBackendPoolConfigurationType, config.BackendPoolNodeIP)
}

// Run migrates the cluster pools to IP-based membership if a cluster pool still has (or is left
// with) NIC references. It is meant to run once per CCM start, before service reconciles; it
// re-reads Azure and re-plans after every failure, so a crash anywhere resumes.
func Run(ctx context.Context, o Options) (Result, error) {
	RegisterMetrics()
	start := time.Now()
	res := Result{Outcome: ResultNotNeeded, Steps: map[string]int{}}
	if !Needed(o.Config) {
		return res, nil
	}
	if o.Writers == nil || o.Caches == nil || o.Nodes == nil || o.Kube == nil {
		return res, errors.New("pool migration: Writers, Caches, Nodes and Kube are required")
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
	if o.APIWait <= 0 {
		o.APIWait = 2 * time.Minute
	}
	x := &executor{o: o, res: &res, announced: map[string]bool{}}
	delay := o.Backoff
	var lastErr error
	for attempt := 1; ; attempt++ {
		in, err := x.read(ctx)
		var p *Plan
		if err == nil {
			p = Build(in)
			res.Warnings = p.Warnings
			if !p.Needed() {
				if attempt == 1 {
					runs.WithLabelValues(ResultNotNeeded).Inc()
					klog.V(2).InfoS("Backend pool migration to IP-based: nothing to migrate")
					return res, nil
				}
				break
			}
			x.lastLBs = p.LoadBalancers
			err = x.execute(ctx, p, in, attempt)
			if err == nil {
				continue // re-plan: the next round must find nothing left
			}
		}
		lastErr = err
		klog.ErrorS(err, "Backend pool migration to IP-based: a step failed; re-planning", "attempt", attempt, "retryIn", delay)
		x.eventServices(ctx, v1.EventTypeWarning, ReasonFailed, fmt.Sprintf("Moving the backend pools to IP-based membership failed (attempt %d, retried): %v", attempt, err))
		if attempt >= o.Attempts {
			res.Outcome, res.Duration = ResultFailed, time.Since(start)
			runs.WithLabelValues(ResultFailed).Inc()
			return res, fmt.Errorf("backend pool migration to IP-based gave up after %d attempts: %w", attempt, lastErr)
		}
		select {
		case <-ctx.Done():
			res.Outcome, res.Duration = ResultFailed, time.Since(start)
			runs.WithLabelValues(ResultFailed).Inc()
			return res, fmt.Errorf("backend pool migration to IP-based: %w (last error: %w)", ctx.Err(), lastErr)
		case <-time.After(delay):
		}
		if delay *= 2; delay > time.Minute {
			delay = time.Minute
		}
	}
	res.Outcome, res.Duration = ResultSuccess, time.Since(start)
	runs.WithLabelValues(ResultSuccess).Inc()
	klog.InfoS("Backend pool migration to IP-based finished", "steps", res.Steps, "duration", res.Duration.Round(time.Millisecond))
	x.eventServices(ctx, v1.EventTypeNormal, ReasonMigrated, "The load balancer's backend pools hold the nodes' IP addresses now (IP-based); no node left them during the move")
	return res, nil
}

type executor struct {
	o         Options
	res       *Result
	mu        sync.Mutex
	announced map[string]bool
	// lastLBs are the load balancers of the last plan (for the events).
	lastLBs []string
}

// clusterLBIDs are the load balancers whose pools the CCM manages.
func (x *executor) clusterLBIDs() []string {
	var out []string
	for _, id := range plan.LoadBalancerIDs(x.o.Config, x.o.ClusterName) {
		if !backends.PreConfigured(x.o.Config.PreConfiguredBackendPoolLoadBalancerTypes, azureid.Name(id)) {
			out = append(out, id)
		}
	}
	return out
}

// read gathers the planner's input, fresh from Azure: the cluster's load balancers, the nodes
// and their ip configurations, the scale set models and every NIC and scale set instance ip
// configuration that references a cluster pool.
func (x *executor) read(ctx context.Context) (Input, error) {
	cfg := x.o.Config
	in := Input{ClusterName: x.o.ClusterName, UseAPI: cfg.EnableMigrateToIPBasedBackendPoolAPI, Refs: map[string][]string{}}
	clusterPools := map[string]bool{}
	nicBased := false
	rgs := map[string]string{strings.ToLower(cfg.ResourceGroup): cfg.ResourceGroup}
	for _, id := range x.clusterLBIDs() {
		w := x.o.Writers.LoadBalancers.For(id)
		w.Invalidate()
		lb, err := w.Peek(ctx)
		if err != nil {
			return in, fmt.Errorf("load balancer %s: %w", azureid.Name(id), err)
		}
		if lb == nil {
			continue
		}
		in.LoadBalancers = append(in.LoadBalancers, lb)
		for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
			name := naming.BackendPoolName(x.o.ClusterName, fam)
			if p := FindPool(lb, name); p != nil {
				clusterPools[strings.ToLower(PoolID(lb, name))] = true
				nicBased = nicBased || HasNICMembers(p)
				for _, rg := range ResourceGroups(backRefs(p)) {
					rgs[strings.ToLower(rg)] = rg
				}
			}
		}
	}
	if len(clusterPools) == 0 {
		return in, nil
	}
	// The nodes only matter while a pool has NIC-based members (the staging pool's addresses);
	// without, the references left behind (by migrateToIpBased) are on NICs of resourceGroup,
	// since nodes of other groups are not pooled, so a start with migrated pools skips them.
	if nicBased {
		if err := x.readNodes(ctx, &in, rgs); err != nil {
			return in, err
		}
	}
	addRefs := func(nics []*armnetwork.Interface) {
		for _, nic := range nics {
			if nic == nil || nic.Properties == nil {
				continue
			}
			for _, c := range nic.Properties.IPConfigurations {
				if c == nil || c.ID == nil || c.Properties == nil {
					continue
				}
				for _, p := range c.Properties.LoadBalancerBackendAddressPools {
					if p != nil && p.ID != nil && clusterPools[strings.ToLower(*p.ID)] {
						in.Refs[*c.ID] = append(in.Refs[*c.ID], *p.ID)
					}
				}
			}
		}
	}
	for _, rg := range rgs {
		x.o.Caches.NICs.Invalidate(rg)
		nics, err := x.o.Caches.NICs.Get(ctx, rg)
		if err != nil && !arm.IsNotFound(err) {
			return in, fmt.Errorf("listing network interfaces of %s: %w", rg, err)
		}
		addRefs(nics)
		x.o.Caches.ScaleSets.Invalidate(rg)
		sets, err := x.o.Caches.ScaleSets.Get(ctx, rg)
		if err != nil && !arm.IsNotFound(err) {
			return in, fmt.Errorf("listing scale sets of %s: %w", rg, err)
		}
		in.ScaleSets = append(in.ScaleSets, sets...)
		for _, ss := range sets {
			if ss == nil || ss.Name == nil || isFlexible(ss) {
				continue // flexible instances are standalone VMs: their NICs are listed above
			}
			key := arm.ScaleSetKey(rg, *ss.Name)
			x.o.Caches.ScaleSetNICs.Invalidate(key)
			nics, err := x.o.Caches.ScaleSetNICs.Get(ctx, key)
			if err != nil && !arm.IsNotFound(err) {
				return in, fmt.Errorf("listing network interfaces of scale set %s: %w", *ss.Name, err)
			}
			addRefs(nics)
		}
	}
	return in, nil
}

// readNodes adds the cluster's nodes and their ip configurations to in (the staging pool's
// addresses are the members' nodes' addresses) and the node resource groups to rgs.
func (x *executor) readNodes(ctx context.Context, in *Input, rgs map[string]string) error {
	nodeList, err := x.o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: x.o.NodeSelector})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodeList.Items {
		n := &nodeList.Items[i]
		inst, err := x.o.Nodes.Instance(ctx, n)
		if errors.Is(err, nodes.ErrInstanceNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if inst.ProviderID.Kind == nodes.KindUnmanaged {
			continue
		}
		configs, err := x.o.Nodes.IPConfigurations(ctx, inst)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		node := Node{Node: n}
		for _, c := range configs {
			node.IPConfigs = append(node.IPConfigs, c.ID)
		}
		in.Nodes = append(in.Nodes, node)
		if rg := inst.VMSet.ResourceGroup; rg != "" {
			rgs[strings.ToLower(rg)] = rg
		}
	}
	return nil
}

func isFlexible(ss *armcompute.VirtualMachineScaleSet) bool {
	return ss.Properties != nil && ss.Properties.OrchestrationMode != nil &&
		*ss.Properties.OrchestrationMode == armcompute.OrchestrationModeFlexible
}

// eventServices records an event on every LoadBalancer service with rules on a load balancer of
// the last plan.
func (x *executor) eventServices(ctx context.Context, typ, reason, msg string) {
	if x.o.Recorder == nil || len(x.lastLBs) == 0 {
		return
	}
	svcs, err := x.o.Kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var rules []string
	for _, id := range x.lastLBs {
		lb, err := x.o.Writers.LoadBalancers.For(id).Peek(ctx)
		if err != nil || lb == nil || lb.Properties == nil {
			continue
		}
		for _, r := range lb.Properties.LoadBalancingRules {
			rules = append(rules, strings.ToLower(str(r.Name)))
		}
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		prefix := strings.ToLower(naming.ServiceLBName(svc.UID))
		for _, r := range rules {
			if strings.HasPrefix(r, prefix) {
				x.o.Recorder.Event(svc, typ, reason, msg)
				break
			}
		}
	}
}
