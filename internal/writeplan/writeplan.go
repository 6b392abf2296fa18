// Package writeplan computes, without writing anything, every ARM write the CCM would make if
// it started now: each service's reconcile (and the cleanup of services being deleted), the
// node backend pools, the admin state of draining nodes, the routes of the nodes' pod CIDRs
// and the Basic to Standard migration — on the same planners as the CCM, over a dry-run
// writer set (package dryrun) that reads Azure through the real writers and records instead of
// writing. It is what `azure-cloud-controller-manager plan` prints before a switch-over.
//
// Nothing is written to the cluster either: services, nodes, namespaces and EndpointSlices are
// listed once, and events the planners raise (an invalid annotation) are collected into the
// plan.
package writeplan

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate"
	"github.com/azure-ccm/azure-ccm/internal/controllers/localpools"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/migration"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/poolmigration"
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/internal/routes"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway"
	"github.com/azure-ccm/azure-ccm/internal/writer"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Options say what to plan: the provider (its clients, node resolver and writers, only read
// from) and the cluster, and which controllers the CCM would run.
type Options struct {
	Cloud       *provider.Cloud
	ClusterName string
	// Kube is only read from.
	Kube kubernetes.Interface
	// NodeSelector is the label selector of the nodes the CCM manages (--node-filter-requirements;
	// "" for all): only those are planned for.
	NodeSelector string
	// Services: the service controller runs (--controllers).
	Services bool
	// AdminState: the admin-state controller runs and azure.json enables it.
	AdminState bool
	// LocalPools: the Local pool updater runs (several load balancers only).
	LocalPools bool
	// Routes: the route controller runs (--configure-cloud-routes, a route table configured),
	// for these cluster CIDRs (--cluster-cidr).
	Routes       bool
	ClusterCIDRs []netip.Prefix
}

// Plan is what the CCM would write.
type Plan struct {
	ClusterName string `json:"clusterName"`
	// Services planned (reconciled or cleaned up), Nodes known.
	Services int `json:"services"`
	Nodes    int `json:"nodes"`
	// Resources written, in the order of their first write.
	Resources []Resource `json:"resources"`
	// Migration is the Basic to Standard migration the CCM would run first (nil: none).
	Migration *Migration `json:"migration,omitempty"`
	// PoolMigration is the NIC-based to IP-based backend pool migration the CCM would run
	// first (nil: none).
	PoolMigration *PoolMigration `json:"poolMigration,omitempty"`
	// Problems are what could not be planned (a service with an invalid annotation, an ARM read
	// that failed) and the warnings the planners raised.
	Problems []Problem `json:"problems,omitempty"`
	// Placeholders describe the placeholder addresses in the changes: what Azure would assign
	// to the resources the plan creates.
	Placeholders map[string]string `json:"placeholders,omitempty"`
}

// Resource is one Azure resource the CCM would write.
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Name string `json:"name"`
	// Action sums up its writes: create, update, delete, or "create, then delete".
	Action string  `json:"action"`
	Writes []Write `json:"writes"`
}

// Write is one write of a resource, with who asked for it and what it changes.
type Write struct {
	Op dryrun.Op `json:"op"`
	// Child is the backend pool of a pool-only write.
	Child   string           `json:"child,omitempty"`
	Actor   string           `json:"actor"`
	Changes []changes.Change `json:"changes,omitempty"`
	// Removes are what a deletion takes with it: a private link service's private endpoint
	// connections, each with its consumer's private endpoint and state.
	Removes []dryrun.Dependent `json:"removes,omitempty"`
}

// Problem is something the plan could not account for, or a planner's warning.
type Problem struct {
	Actor   string `json:"actor"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
}

// Migration is the Basic to Standard migration's first plan.
type Migration struct {
	BasicLoadBalancers []string `json:"basicLoadBalancers"`
	Steps              []string `json:"steps"`
	Warnings           []string `json:"warnings,omitempty"`
}

// PoolMigration is the backend pool migration's plan: its steps ("phase target") and warnings.
type PoolMigration struct {
	LoadBalancers []string `json:"loadBalancers"`
	Steps         []string `json:"steps"`
	Warnings      []string `json:"warnings,omitempty"`
}

// Pending reports whether the CCM would write anything, or the plan found problems the
// operator must look at before a switch-over.
func (p *Plan) Pending() bool {
	return len(p.Resources) > 0 || p.Migration != nil || p.PoolMigration != nil || len(p.Problems) > 0
}

// Run computes the plan.
func Run(ctx context.Context, o Options) (*Plan, error) {
	if o.Cloud == nil || o.Kube == nil {
		return nil, errors.New("writeplan: Cloud and Kube are required")
	}
	cfg := o.Cloud.Config
	p := &Plan{ClusterName: o.ClusterName}
	in, err := list(ctx, o)
	if err != nil {
		return nil, err
	}
	p.Nodes = len(in.nodes)
	for _, n := range in.nodes {
		o.Cloud.Resolver.Nodes().Set(n)
	}
	rec := dryrun.NewRecorder()

	var set *writers.Set
	if o.Services && !servicegateway.Enabled(cfg) {
		if err := planMigration(ctx, o, p); err != nil {
			p.Problems = append(p.Problems, Problem{Actor: "Basic to Standard migration", Message: err.Error()})
		}
		if err := planPoolMigration(ctx, o, p); err != nil {
			p.Problems = append(p.Problems, Problem{Actor: "backend pool migration to IP-based", Message: err.Error()})
		}
		if set, err = planServices(ctx, o, in, rec, p); err != nil {
			return nil, err
		}
	} else if o.Services {
		p.Problems = append(p.Problems, Problem{Actor: "service controller",
			Message: "serviceGatewayEnabled: the service-gateway controller writes its resources with its own calls; they are not planned"})
	}
	if o.Routes {
		if set == nil {
			set = dryrun.NewSet(o.Cloud.Writers, rec)
		}
		if err := planRoutes(ctx, o, in, set, rec); err != nil {
			p.Problems = append(p.Problems, Problem{Actor: "route controller", Message: err.Error()})
		}
	}
	p.Resources = group(rec.Writes())
	p.Problems = withEvents(p.Problems, rec.Events())
	p.Placeholders = map[string]string{}
	for _, r := range p.Resources {
		for _, w := range r.Writes {
			for _, c := range w.Changes {
				for _, f := range c.Fields {
					for _, v := range append([]string{f.Old, f.New}, append(f.Added, f.Removed...)...) {
						if d, ok := rec.Placeholder(v); ok {
							p.Placeholders[v] = d
						}
					}
				}
			}
		}
	}
	return p, nil
}

// withEvents adds the planners' Warning events to the problems; an error that only repeats an
// event of the same actor (an invalid annotation is both) is dropped.
func withEvents(problems []Problem, events []dryrun.Event) []Problem {
	var warned []Problem
	for _, ev := range events {
		if ev.Type == v1.EventTypeWarning {
			warned = append(warned, Problem{Actor: ev.Actor, Reason: ev.Reason, Message: ev.Message})
		}
	}
	var out []Problem
	for _, pr := range problems {
		dup := false
		for _, w := range warned {
			dup = dup || (w.Actor == pr.Actor && strings.Contains(pr.Message, w.Message))
		}
		if !dup {
			out = append(out, pr)
		}
	}
	out = append(out, warned...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Actor < out[j].Actor })
	return out
}

// inputs are the cluster objects, listed once.
type inputs struct {
	services   []*v1.Service
	nodes      []*v1.Node
	svcLister  corelisters.ServiceLister
	nodeLister corelisters.NodeLister
	nsLister   corelisters.NamespaceLister
	slices     discoverylisters.EndpointSliceLister
}

func list(ctx context.Context, o Options) (*inputs, error) {
	in := &inputs{}
	svcs, err := o.Kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	nodes, err := o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: o.NodeSelector})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	si, ni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range svcs.Items {
		s := &svcs.Items[i]
		in.services = append(in.services, s)
		_ = si.Add(s)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		in.nodes = append(in.nodes, n)
		_ = ni.Add(n)
	}
	sort.Slice(in.services, func(i, j int) bool { return key(in.services[i]) < key(in.services[j]) })
	in.svcLister, in.nodeLister = corelisters.NewServiceLister(si), corelisters.NewNodeLister(ni)
	cfg := o.Cloud.Config
	for _, m := range cfg.MultipleStandardLoadBalancerConfigurations {
		if m.ServiceNamespaceSelector == nil {
			continue
		}
		nss, err := o.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for i := range nss.Items {
			_ = idx.Add(&nss.Items[i])
		}
		in.nsLister = corelisters.NewNamespaceLister(idx)
		break
	}
	if len(cfg.MultipleStandardLoadBalancerConfigurations) > 0 && o.LocalPools {
		eps, err := o.Kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing EndpointSlices: %w", err)
		}
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for i := range eps.Items {
			_ = idx.Add(&eps.Items[i])
		}
		in.slices = discoverylisters.NewEndpointSliceLister(idx)
	}
	return in, nil
}

func key(s *v1.Service) string { return s.Namespace + "/" + s.Name }

// planServices runs what the service controller would: EnsureLoadBalancer for every
// LoadBalancer service, EnsureLoadBalancerDeleted for those being deleted (or no longer of
// type LoadBalancer) that still carry its finalizer.
// It returns the dry-run writers it planned on.
func planServices(ctx context.Context, o Options, in *inputs, rec *dryrun.Recorder, p *Plan) (*writers.Set, error) {
	cloud, cfg := o.Cloud, o.Cloud.Config
	bo := loadbalancer.BuildOptions{Config: cfg, Writers: cloud.Writers, PublicIPs: cloud.Clients.Caches.NetworkPublicIPs,
		PrivateLinks: cloud.Clients.Caches.PrivateLinkServices,
		Zones:        cloud.RegionZones(), Recorder: rec.EventRecorder(), Services: in.svcLister, Namespaces: in.nsLister,
		Nodes: cloud.Resolver, Caches: cloud.Clients.Caches, DryRun: rec}
	if o.AdminState {
		bo.PoolEntries = adminstate.PoolEntries(in.nodeLister)
	}
	if in.slices != nil {
		synced := func() bool { return true }
		bo.EndpointNodes = localpools.EndpointNodes(in.slices, synced, synced, synced)
	}
	parts, err := loadbalancer.Build(bo)
	if err != nil {
		return nil, fmt.Errorf("building the load balancer planners: %w", err)
	}
	lb := parts.LoadBalancer
	nodes := membership.ServiceControllerNodes(in.nodes)
	for _, svc := range in.services {
		if !plan.ServedHere(svc) {
			continue
		}
		wants := svc.Spec.Type == v1.ServiceTypeLoadBalancer
		cleanup := servicehelper.HasLBFinalizer(svc) && (svc.DeletionTimestamp != nil || !wants)
		switch {
		case cleanup:
			actor := "service " + key(svc) + " (being deleted)"
			if svc.DeletionTimestamp == nil {
				actor = "service " + key(svc) + " (no longer of type LoadBalancer)"
			}
			rec.SetActor(actor)
			p.Services++
			if err := lb.EnsureLoadBalancerDeleted(ctx, o.ClusterName, svc); err != nil {
				p.Problems = append(p.Problems, Problem{Actor: actor, Message: err.Error()})
			}
		case wants && svc.DeletionTimestamp == nil:
			actor := "service " + key(svc)
			rec.SetActor(actor)
			p.Services++
			if _, err := lb.EnsureLoadBalancer(ctx, o.ClusterName, svc, nodes); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
				p.Problems = append(p.Problems, Problem{Actor: actor, Message: err.Error()})
			}
		}
	}
	if o.AdminState {
		rec.SetActor("admin state of draining nodes")
		edit := adminstate.PoolEntries(in.nodeLister)
		for _, id := range plan.LoadBalancerIDs(cfg, o.ClusterName) {
			if err := planAdminState(ctx, parts.Writers.LoadBalancers.For(id), o.ClusterName, edit); err != nil {
				p.Problems = append(p.Problems, Problem{Actor: "admin-state controller", Message: err.Error()})
			}
		}
	}
	return parts.Writers, nil
}

// planAdminState runs the admin-state controller's edit on the cluster pools of a load
// balancer (as planned so far): entries of draining nodes Down, the others None.
func planAdminState(ctx context.Context, w *writer.Writer[armnetwork.LoadBalancer], clusterName string, edit func(*armnetwork.BackendAddressPool)) error {
	lb, err := w.Peek(ctx)
	if err != nil || lb == nil || lb.Properties == nil {
		return err
	}
	for _, f := range []naming.Family{naming.IPv4, naming.IPv6} {
		name := naming.BackendPoolName(clusterName, f)
		if backends.FindPool(lb, name) == nil {
			continue
		}
		if _, err := w.SubmitChild(ctx, name, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
			if pool := backends.FindPool(cur, name); pool != nil {
				edit(pool)
			}
			return cur, nil
		}); err != nil {
			return fmt.Errorf("backend pool %s: %w", name, err)
		}
	}
	return nil
}

// planRoutes runs the route controller's decision (routes.Reconcile) and writes it through
// the provider's route implementation on the dry-run writers.
func planRoutes(ctx context.Context, o Options, in *inputs, set *writers.Set, rec *dryrun.Recorder) error {
	rp, ok := o.Cloud.RoutesOn(set)
	if !ok {
		return nil
	}
	current, err := rp.ListRoutes(ctx, o.ClusterName)
	if err != nil {
		return err
	}
	var have []routes.Route
	byName := map[string]*cloudprovider.Route{}
	for _, r := range current {
		have = append(have, routes.Route{Name: r.Name, Node: string(r.TargetNode), CIDR: r.DestinationCIDR})
		byName[r.Name] = r
	}
	var nodes []routes.NodeCIDRs
	addrs := map[string][]v1.NodeAddress{}
	for _, n := range in.nodes {
		nodes = append(nodes, routes.NodeCIDRs{Name: n.Name, PodCIDRs: n.Spec.PodCIDRs})
		addrs[n.Name] = n.Status.Addresses
	}
	create, del := routes.Reconcile(nodes, have, o.ClusterCIDRs)
	var errs []error
	for _, r := range del {
		rec.SetActor("node " + r.Node + " (route controller)")
		if err := rp.DeleteRoute(ctx, o.ClusterName, byName[r.Name]); err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", r.Name, err))
		}
	}
	for _, r := range create {
		rec.SetActor("node " + r.Node + " (route controller)")
		if err := rp.CreateRoute(ctx, o.ClusterName, "", &cloudprovider.Route{TargetNode: types.NodeName(r.Node),
			TargetNodeAddresses: addrs[r.Node], DestinationCIDR: r.CIDR}); err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// planMigration previews the Basic to Standard migration the CCM runs before serving services.
func planMigration(ctx context.Context, o Options, p *Plan) error {
	cloud := o.Cloud
	mo := migration.Options{Config: cloud.Config, ClusterName: o.ClusterName, Network: cloud.Clients.Network,
		Compute: cloud.Clients.Compute, Kube: o.Kube, NodeSelector: o.NodeSelector}
	if cloud.Resolver != nil {
		mo.VMSetOf = func(ctx context.Context, n *v1.Node) (string, error) {
			inst, err := cloud.Resolver.Instance(ctx, n)
			if err != nil {
				return "", err
			}
			return inst.VMSet.Name, nil
		}
	}
	mp, err := migration.Preview(ctx, mo)
	if err != nil {
		return err
	}
	if !mp.Needed() {
		return nil
	}
	m := &Migration{Warnings: mp.Warnings}
	for _, id := range mp.BasicLBs {
		m.BasicLoadBalancers = append(m.BasicLoadBalancers, changes.ShortID(id))
	}
	for _, s := range mp.Steps {
		m.Steps = append(m.Steps, s.Phase.String()+" "+changes.ShortID(s.Target))
	}
	p.Migration = m
	return nil
}

// planPoolMigration previews the NIC-based to IP-based backend pool migration the CCM runs
// before serving services.
func planPoolMigration(ctx context.Context, o Options, p *Plan) error {
	cloud := o.Cloud
	mp, err := poolmigration.Preview(ctx, poolmigration.Options{Config: cloud.Config, ClusterName: o.ClusterName,
		Writers: cloud.Writers, Caches: cloud.Clients.Caches, Nodes: cloud.Resolver, Kube: o.Kube, NodeSelector: o.NodeSelector})
	if err != nil {
		return err
	}
	if !mp.Needed() {
		return nil
	}
	m := &PoolMigration{Warnings: mp.Warnings}
	for _, id := range mp.LoadBalancers {
		m.LoadBalancers = append(m.LoadBalancers, changes.ShortID(id))
	}
	for _, s := range mp.Steps {
		m.Steps = append(m.Steps, s.Phase.String()+" "+changes.ShortID(s.Target))
	}
	p.PoolMigration = m
	return nil
}

// group gathers the writes by resource, in the order of their first write.
func group(ws []dryrun.Write) []Resource {
	var out []Resource
	idx := map[string]int{}
	for _, w := range ws {
		k := strings.ToLower(w.ID)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Resource{Type: w.ResourceType, ID: w.ID, Name: w.Name()})
		}
		out[i].Writes = append(out[i].Writes, Write{Op: w.Op, Child: w.Child, Actor: w.Actor, Changes: w.Changes, Removes: w.Removes})
	}
	for i := range out {
		ws := out[i].Writes
		existed, exists := ws[0].Op != dryrun.Create, ws[len(ws)-1].Op != dryrun.Delete
		switch {
		case !existed && exists:
			out[i].Action = "create"
		case existed && !exists:
			out[i].Action = "delete"
		case existed && exists:
			out[i].Action = "update"
		default:
			out[i].Action = "create, then delete"
		}
	}
	return out
}
