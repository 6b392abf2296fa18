package driftaudit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
)

func svc(name, uid string, mod ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), ResourceVersion: "1",
			Finalizers: []string{servicehelper.LoadBalancerCleanupFinalizer}},
		Spec:   v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.1"}}}},
	}
	for _, m := range mod {
		m(s)
	}
	return s
}

func TestOwnedAndConfirmed(t *testing.T) {
	now := metav1.Now()
	other := "example.com/lb"
	ours := "service.k8s.io/azure"
	for _, c := range []struct {
		name string
		svc  *v1.Service
		want string
	}{
		{"served", svc("a", "1"), ""},
		{"our class", svc("a", "1", func(s *v1.Service) { s.Spec.LoadBalancerClass = &ours }), ""},
		{"being deleted", svc("a", "1", func(s *v1.Service) { s.DeletionTimestamp = &now }), SkipDeleting},
		{"ClusterIP", svc("a", "1", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }), SkipNotLB},
		{"another class", svc("a", "1", func(s *v1.Service) { s.Spec.LoadBalancerClass = &other }), SkipElsewhere},
		{"no finalizer", svc("a", "1", func(s *v1.Service) { s.Finalizers = nil }), SkipNoFinalizer},
		{"no ingress yet", svc("a", "1", func(s *v1.Service) { s.Status.LoadBalancer.Ingress = nil }), SkipNoIngress},
	} {
		if got := Owned(c.svc); got != c.want {
			t.Errorf("Owned(%s) = %q, want %q", c.name, got, c.want)
		}
	}
	audited := svc("a", "1")
	for _, c := range []struct {
		name string
		live *v1.Service
		want string
	}{
		{"same", svc("a", "1", func(s *v1.Service) { s.ResourceVersion = "2" }), ""},
		{"gone", nil, SkipGone},
		{"recreated", svc("a", "2"), SkipRecreated},
		{"deleting", svc("a", "1", func(s *v1.Service) { s.DeletionTimestamp = &now }), SkipDeleting},
		{"type changed", svc("a", "1", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort }), SkipNotLB},
	} {
		if got := Confirmed(audited, c.live); got != c.want {
			t.Errorf("Confirmed(%s) = %q, want %q", c.name, got, c.want)
		}
	}
}

func node(name string, mod ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{"a": "b"}},
		Spec:   v1.NodeSpec{ProviderID: "azure:///x/" + name},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}}
	for _, m := range mod {
		m(n)
	}
	return n
}

func TestSummary(t *testing.T) {
	lb := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	nsg := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/nsg"
	ws := []dryrun.Write{
		{ResourceType: dryrun.TypeLoadBalancer, ID: lb, Op: dryrun.Update, Changes: []changes.Change{
			{Collection: "loadBalancingRules", Name: "a1-TCP-80", Op: changes.Added},
			{Collection: "probes", Name: "a1-TCP-80", Op: changes.Changed, Fields: []changes.Field{{Path: "properties.intervalInSeconds", Old: "10", New: "5"}}},
		}},
		{ResourceType: dryrun.TypeSecurityGroup, ID: nsg, Op: dryrun.Update, Changes: []changes.Change{{Collection: "securityRules", Name: "allow", Op: changes.Added}}},
		{ResourceType: dryrun.TypePublicIP, ID: "/x/publicIPAddresses/p", Op: dryrun.Create},
	}
	want := "load balancer kubernetes: loadBalancingRules a1-TCP-80 added; load balancer kubernetes: probes a1-TCP-80 changed (properties.intervalInSeconds 10 → 5); " +
		"network security group nsg: securityRules allow added; public IP p created"
	if got := Summary(ws); got != want {
		t.Errorf("Summary =\n%s\nwant\n%s", got, want)
	}
	got := countKinds(ws)
	if got["rule"] != 1 || got["probe"] != 1 || got["nsg_rule"] != 1 || got["public_ip"] != 1 || len(got) != 4 {
		t.Errorf("countKinds = %v", got)
	}
	var many []dryrun.Write
	for range 10 {
		many = append(many, dryrun.Write{ResourceType: dryrun.TypeLoadBalancer, ID: lb, Op: dryrun.Update,
			Changes: []changes.Change{{Collection: "probes", Name: "p" + string(rune('a'+len(many))), Op: changes.Added}}})
	}
	if s := Summary(many); !strings.HasSuffix(s, "; and 4 more") {
		t.Errorf("long summary not cut: %s", s)
	}
}

// fakeAuditor returns scripted results: drift for the services named in drifted, whose
// confirm it calls as the real auditor does.
type fakeAuditor struct {
	mu      sync.Mutex
	azure   string
	drifted map[string]bool
	fail    map[string]error
	// repairErr fails the repair of a service.
	repairErr map[string]error
	audits    int
	live      map[string]*v1.Service // what confirm returned, by name
	skipped   map[string]string
	// owners are the service tag entries of the owned public IPs the sweep looks at; gone is
	// what the controller said of each.
	owners []string
	gone   map[string]bool
}

func (f *fakeAuditor) SweepPublicIPs(ctx context.Context, _ string, _ []*v1.Service, gone loadbalancer.Gone) (loadbalancer.SweepResult, error) {
	var res loadbalancer.SweepResult
	var errs []error
	for _, k := range f.owners {
		g, err := gone(ctx, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.mu.Lock()
		f.gone[k] = g
		f.mu.Unlock()
		if g {
			res.Deleted++
			res.Names = append(res.Names, "rg/pip-of-"+k)
		}
	}
	return res, errors.Join(errs...)
}

func (f *fakeAuditor) Refresh(context.Context, string, []*v1.Service) (string, error) {
	return f.azure, nil
}

func (f *fakeAuditor) drift(s *v1.Service) []dryrun.Write {
	return []dryrun.Write{{ResourceType: dryrun.TypeLoadBalancer, ID: "/x/loadBalancers/kubernetes", Op: dryrun.Update,
		Changes: []changes.Change{{Collection: "loadBalancingRules", Name: s.Name + "-TCP-80", Op: changes.Added}}}}
}

func (f *fakeAuditor) Check(_ context.Context, _ string, s *v1.Service, _ []*v1.Node) ([]dryrun.Write, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audits++
	if err := f.fail[s.Name]; err != nil {
		return nil, err
	}
	if f.drifted[s.Name] {
		return f.drift(s), nil
	}
	return nil, nil
}

func (f *fakeAuditor) Repair(ctx context.Context, _ string, s *v1.Service, _ []*v1.Node, confirm loadbalancer.Confirm) (loadbalancer.AuditResult, error) {
	drift := f.drift(s)
	live, skip, err := confirm(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		return loadbalancer.AuditResult{Drift: drift}, err
	}
	if live == nil {
		f.skipped[s.Name] = skip
		return loadbalancer.AuditResult{Drift: drift, Skipped: skip}, nil
	}
	f.live[s.Name] = live
	if err := f.repairErr[s.Name]; err != nil {
		return loadbalancer.AuditResult{Drift: drift}, err
	}
	return loadbalancer.AuditResult{Drift: drift, Repaired: true}, nil
}

func TestPass(t *testing.T) {
	web, api, gone := svc("web", "1"), svc("api", "2"), svc("gone", "3")
	pending := svc("pending", "4", func(s *v1.Service) { s.Status.LoadBalancer.Ingress = nil })
	kube := fake.NewClientset(web, api) // "gone" was deleted from the API server already
	svcIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, s := range []*v1.Service{web, api, gone, pending} {
		_ = svcIdx.Add(s)
	}
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = nodeIdx.Add(node("n1"))
	a := &fakeAuditor{azure: "etags-1", drifted: map[string]bool{}, fail: map[string]error{}, live: map[string]*v1.Service{}, skipped: map[string]string{},
		repairErr: map[string]error{}, gone: map[string]bool{}}
	rec := record.NewFakeRecorder(10)
	c, err := New(Options{ClusterName: "kubernetes", Auditor: a, Kube: kube, Services: corelisters.NewServiceLister(svcIdx),
		Nodes: corelisters.NewNodeLister(nodeIdx), Recorder: rec, Period: time.Minute, FullEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// In step: every owned service planned (not the one still provisioning), nothing else.
	if r := c.Pass(ctx); r.Audited != 3 || r.Drifted != 0 || r.Unchanged {
		t.Fatalf("first pass %+v", r)
	}
	// Nothing moved: nothing planned, until a full pass is due.
	for i := range 3 {
		if r := c.Pass(ctx); !r.Unchanged {
			t.Fatalf("pass %d with nothing changed: %+v", i, r)
		}
	}
	if r := c.Pass(ctx); r.Unchanged || r.Audited != 3 {
		t.Fatalf("the full pass after 3 unchanged ones: %+v", r)
	}
	if a.audits != 6 {
		t.Errorf("%d audits, want 6 (two full passes)", a.audits)
	}
	// Services and nodes that change are the service controller's: with Azure changed only by
	// the CCM itself, nothing is planned.
	web.ResourceVersion = "7"
	_ = svcIdx.Update(web)
	_ = nodeIdx.Add(node("n2"))
	if r := c.Pass(ctx); !r.Unchanged {
		t.Fatalf("pass after a service and a node changed: %+v", r)
	}

	// Azure drifted for web and gone: web is repaired (the live object is used), gone is not.
	a.azure = "etags-2"
	a.drifted["web"], a.drifted["gone"] = true, true
	a.fail["api"] = errors.New("invalid annotation")
	r := c.Pass(ctx)
	if r.Drifted != 2 || r.Repaired != 1 || r.Skipped != 1 || r.Errors != 1 {
		t.Fatalf("pass with drift %+v", r)
	}
	if a.live["web"] == nil || a.skipped["gone"] != SkipGone {
		t.Errorf("confirm: live %v, skipped %v", a.live, a.skipped)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, "Normal "+ReasonDriftRepaired) || !strings.Contains(ev, "loadBalancingRules web-TCP-80 added") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no DriftRepaired event")
	}
	select {
	case ev := <-rec.Events:
		t.Errorf("unexpected event %q", ev)
	default:
	}
	// A pass with drift is never the reference of "unchanged".
	a.drifted = map[string]bool{}
	delete(a.fail, "api")
	if r := c.Pass(ctx); r.Unchanged {
		t.Error("the pass after drift was skipped")
	}

	// A repair that fails: a Warning event naming the drift and the error.
	a.azure = "etags-3"
	a.drifted["web"], a.repairErr["web"] = true, errors.New("ARM said no")
	if r := c.Pass(ctx); r.Errors != 1 || r.Repaired != 0 {
		t.Fatalf("pass with a failed repair %+v", r)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, "Warning "+ReasonDriftRepairFailed) || !strings.Contains(ev, "ARM said no") || !strings.Contains(ev, "web-TCP-80") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no DriftRepairFailed event")
	}
}

// TestSweepGone: a public IP's service entry is gone only when neither the informer's cache nor
// the API server has a service that still uses public IPs under that name.
func TestSweepGone(t *testing.T) {
	now := metav1.Now()
	web := svc("web", "1")
	staleInCache := svc("stale", "2") // deleted on the API server; the cache lags
	clusterIP := svc("clusterip", "3", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP; s.Finalizers = nil })
	provisioning := svc("new", "4", func(s *v1.Service) { s.Finalizers = nil; s.Status.LoadBalancer.Ingress = nil })
	deleting := svc("deleting", "5", func(s *v1.Service) { s.DeletionTimestamp = &now })
	cleanedUp := svc("cleaned", "6", func(s *v1.Service) { s.DeletionTimestamp = &now; s.Finalizers = []string{"example.com/other"} })
	kube := fake.NewClientset(web, clusterIP, provisioning, deleting, cleanedUp)
	svcIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, s := range []*v1.Service{web, staleInCache, clusterIP} {
		_ = svcIdx.Add(s)
	}
	a := &fakeAuditor{azure: "x", drifted: map[string]bool{}, fail: map[string]error{}, live: map[string]*v1.Service{}, skipped: map[string]string{},
		repairErr: map[string]error{}, gone: map[string]bool{},
		owners: []string{"default/web", "default/stale", "default/clusterip", "default/new", "default/deleting", "default/cleaned", "default/deleted", "frontend"}}
	c, err := New(Options{ClusterName: "kubernetes", Auditor: a, Kube: kube, Services: corelisters.NewServiceLister(svcIdx),
		Nodes: corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), Recorder: record.NewFakeRecorder(10), Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Pass(context.Background())
	want := map[string]bool{"default/web": false, "default/stale": false, "default/clusterip": true, "default/new": false,
		"default/deleting": false, "default/cleaned": true, "default/deleted": true, "frontend": false}
	for k, w := range want {
		if g, ok := a.gone[k]; !ok || g != w {
			t.Errorf("gone(%s) = %v (asked %v), want %v", k, g, ok, w)
		}
	}
	if r.Released != 3 || r.Unchanged {
		t.Errorf("pass %+v, want 3 public IPs released", r)
	}
	// A pass that released public IPs is no reference for skipping the next.
	a.owners = nil
	if r := c.Pass(context.Background()); r.Unchanged {
		t.Error("the pass after a release was skipped")
	}
}
