package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// multiEnv is an azsim environment with three load balancer configurations: the default, lb-a
// for services labelled team=a (and nodes labelled lb=a), lb-b.
func multiEnv(t *testing.T) (*env, cache.Indexer) {
	t.Helper()
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
		{Name: testCluster, PrimaryVMSet: "pool0"},
		{Name: "lb-a", PrimaryVMSet: "pool-a", ServiceLabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lb": "a"}}},
		{Name: "lb-b", PrimaryVMSet: "pool-b"},
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.build(t, BuildOptions{Services: corelisters.NewServiceLister(idx), EndpointNodes: func(ns, name string) ([]string, bool) {
		if e.endpoints == nil {
			return nil, false
		}
		return e.endpoints(ns, name)
	}})
	return e, idx
}

func (e *env) ensure(t *testing.T, ctx context.Context, idx cache.Indexer, svc *v1.Service, nodes []*v1.Node) string {
	t.Helper()
	st, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if err != nil {
		t.Fatalf("ensure %s: %v", svc.Name, err)
	}
	if len(st.Ingress) == 0 {
		t.Fatalf("ensure %s: no ingress", svc.Name)
	}
	svc.Status.LoadBalancer = *st
	_ = idx.Update(svc)
	return st.Ingress[0].IP
}

// holds reports whether the LB has rules of the service.
func holds(lb *armnetwork.LoadBalancer, svc *v1.Service) bool {
	return lb != nil && plan.HasServiceObjects(lb, naming.ServiceLBName(svc.UID))
}

func (e *env) lbOrNil(t *testing.T, name string) *armnetwork.LoadBalancer {
	t.Helper()
	resp, err := e.net.NewLoadBalancersClient().Get(ctxT(t), testRG, name, nil)
	if err != nil {
		if strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "NotFound") {
			return nil
		}
		t.Fatal(err)
	}
	return &resp.LoadBalancer
}

func poolIPs(lb *armnetwork.LoadBalancer, pool string) []string {
	var out []string
	if p := backends.FindPool(lb, pool); p != nil && p.Properties != nil {
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			out = append(out, str(a.Properties.IPAddress))
		}
	}
	slices.Sort(out)
	return out
}

func TestMultiSLBPlacementMoveAndNodes(t *testing.T) {
	e, idx := multiEnv(t)
	ctx := ctxT(t)
	nodes := []*v1.Node{
		node("n1", "10.240.0.11", nil), node("n2", "10.240.0.12", nil),
		node("n3", "10.240.0.13", map[string]string{"lb": "a"}), node("n4", "10.240.0.14", nil),
	}
	// Fewest rules: the first goes to the default (all empty: configuration order), the second
	// to lb-b; lb-a's label selector keeps plain services off it.
	s1 := service("a1aaaaaa-0000-0000-0000-000000000000", "s1", nil)
	e.ensure(t, ctx, idx, s1, nodes)
	s2 := service("a2aaaaaa-0000-0000-0000-000000000000", "s2", nil)
	e.ensure(t, ctx, idx, s2, nodes)
	if !holds(e.lbOrNil(t, testCluster), s1) || !holds(e.lbOrNil(t, "lb-b"), s2) {
		t.Fatalf("s1 should be on %s and s2 on lb-b", testCluster)
	}
	// A team=a service goes to lb-a (its selector matched: selector-less ones are fallback).
	s3 := service("a3aaaaaa-0000-0000-0000-000000000000", "s3", nil)
	s3.Labels = map[string]string{"team": "a"}
	ip3 := e.ensure(t, ctx, idx, s3, nodes)
	lbA := e.lbOrNil(t, "lb-a")
	if !holds(lbA, s3) {
		t.Fatal("s3 should be on lb-a")
	}
	// Node placement: n3 matches lb-a's node selector; the others spread over the two
	// selector-less load balancers by fewest nodes.
	if got := poolIPs(lbA, testCluster); !slices.Equal(got, []string{"10.240.0.13"}) {
		t.Fatalf("lb-a pool = %v", got)
	}
	d, b := poolIPs(e.lbOrNil(t, testCluster), testCluster), poolIPs(e.lbOrNil(t, "lb-b"), testCluster)
	if len(d)+len(b) != 3 || len(d) < 1 || len(b) < 1 {
		t.Fatalf("default pool %v, lb-b pool %v", d, b)
	}
	// Stable: reconciling again changes nothing.
	before := e.writes(t)
	e.ensure(t, ctx, idx, s1, nodes)
	e.ensure(t, ctx, idx, s3, nodes)
	if w := e.writes(t) - before; w != 0 {
		t.Fatalf("steady-state reconciles wrote %d times", w)
	}

	// The label goes: s3 must leave lb-a and keeps its IP.
	s3.Labels = nil
	if got := e.ensure(t, ctx, idx, s3, nodes); got != ip3 {
		t.Fatalf("moved service IP %s, want %s", got, ip3)
	}
	if holds(e.lbOrNil(t, "lb-a"), s3) {
		t.Fatal("s3 still on lb-a")
	}
	if !holds(e.lbOrNil(t, testCluster), s3) && !holds(e.lbOrNil(t, "lb-b"), s3) {
		t.Fatal("s3 is on no load balancer")
	}
	if !slices.ContainsFunc(drain(e), func(ev string) bool { return strings.Contains(ev, multislb.ReasonLoadBalancerMoved) }) {
		t.Fatal("no LoadBalancerMoved event")
	}

	// Annotation naming an unknown configuration: a warning and no change.
	bad := service("a4aaaaaa-0000-0000-0000-000000000000", "bad", map[string]string{annotations.LoadBalancerConfigs: "nope"})
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, bad, nodes); err == nil || strings.Count(err.Error(), "service default/bad") != 1 {
		t.Fatalf("error %v, want one naming the service once for an unknown configuration", err)
	}
	if !slices.ContainsFunc(drain(e), func(ev string) bool { return strings.Contains(ev, multislb.ReasonNoEligibleLoadBalancer) }) {
		t.Fatal("no NoEligibleLoadBalancer event")
	}

	// Deletion finds the service wherever it is.
	for _, s := range []*v1.Service{s1, s2, s3} {
		if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{testCluster, "lb-a", "lb-b"} {
		if lb := e.lbOrNil(t, name); lb != nil {
			t.Fatalf("load balancer %s left after every service was deleted", name)
		}
	}
}

// A service whose frontend another service uses is never moved, and neither is that other
// service: the move is refused with a Warning on the service whose change asked for it, and
// nothing is written. A service asking for an IP that lives on a load balancer it may not use
// is refused likewise.
func TestMultiSLBSharedIPIsNotMoved(t *testing.T) {
	e, idx := multiEnv(t)
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n1", "10.240.0.11", nil)}
	ann := map[string]string{annotations.Internal: "true", annotations.IPv4: "10.240.0.200"}
	p1 := service("b1bbbbbb-0000-0000-0000-000000000000", "p1", ann)
	p1.Labels = map[string]string{"team": "a"}
	e.ensure(t, ctx, idx, p1, nodes)
	p2 := service("b2bbbbbb-0000-0000-0000-000000000000", "p2", ann, v1.ServicePort{Name: "x", Port: 81, NodePort: 30081, Protocol: v1.ProtocolTCP})
	p2.Labels = map[string]string{"team": "a"}
	e.ensure(t, ctx, idx, p2, nodes)
	lb := e.lbOrNil(t, "lb-a-internal")
	if !holds(lb, p1) || !holds(lb, p2) || len(lb.Properties.FrontendIPConfigurations) != 1 {
		t.Fatalf("both services should share one frontend on lb-a-internal")
	}
	drain(e)
	refused := func(svc *v1.Service, reason, msg string) {
		t.Helper()
		before := e.writes(t)
		_, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Fatalf("ensure %s: error %v, want one with %q", svc.Name, err, msg)
		}
		if n := strings.Count(err.Error(), "service default/"+svc.Name+":"); n != 1 {
			t.Fatalf("the service is named %d times in %q", n, err)
		}
		evs := drain(e)
		if !slices.ContainsFunc(evs, func(ev string) bool { return strings.Contains(ev, "Warning "+reason) && strings.Contains(ev, msg) }) {
			t.Fatalf("no Warning %s with %q in %v", reason, msg, evs)
		}
		if slices.ContainsFunc(evs, func(ev string) bool { return strings.Contains(ev, multislb.ReasonLoadBalancerMoved) }) {
			t.Fatalf("a service moved: %v", evs)
		}
		if w := e.writes(t) - before; w != 0 {
			t.Fatalf("a refused reconcile wrote %d times", w)
		}
	}
	stay := func() {
		t.Helper()
		if l := e.lbOrNil(t, "lb-a-internal"); !holds(l, p1) || !holds(l, p2) {
			t.Fatal("p1 and p2 are no longer both on lb-a-internal")
		}
	}
	// p2 loses the label: its move would take the frontend p1 uses, so it is refused.
	p2.Labels = nil
	_ = idx.Update(p2)
	refused(p2, multislb.ReasonMoveRefused, `service "p2" cannot migrate from load balancer "lb-a-internal" to "kubernetes-internal" because frontend IP "ab1bbbbbb00000000000000000000000" is also referenced by other resources: load balancing rule ab1bbbbbb00000000000000000000000-TCP-80`)
	stay()
	// p1, untouched, reconciles where it is.
	e.ensure(t, ctx, idx, p1, nodes)
	stay()
	// p1 loses it too: refused as well (p2's rules use its frontend).
	p1.Labels = nil
	_ = idx.Update(p1)
	refused(p1, multislb.ReasonMoveRefused, `service "p1" cannot migrate from load balancer "lb-a-internal"`)
	stay()
	// A new service asking for the same IP, not eligible on lb-a.
	p3 := service("b3bbbbbb-0000-0000-0000-000000000000", "p3", ann, v1.ServicePort{Name: "y", Port: 82, NodePort: 30082, Protocol: v1.ProtocolTCP})
	refused(p3, multislb.ReasonNoEligibleLoadBalancer, `service "p3" specifies an IP that resides on load balancer "lb-a-internal", which is not in the eligible set [kubernetes lb-b]`)
	// The labels come back: both reconcile where they are.
	p1.Labels, p2.Labels = map[string]string{"team": "a"}, map[string]string{"team": "a"}
	e.ensure(t, ctx, idx, p1, nodes)
	e.ensure(t, ctx, idx, p2, nodes)
	stay()
}

// The configurations annotation with a requested IP is refused with several load balancers,
// before anything is written; with one load balancer the annotation means nothing and the
// service reconciles.
func TestMultiSLBConfigurationsWithARequestedIP(t *testing.T) {
	nodes := []*v1.Node{node("n1", "10.240.0.11", nil)}
	for _, tc := range []struct {
		name string
		ann  map[string]string
	}{
		{"address", map[string]string{annotations.Internal: "true", annotations.IPv4: "10.240.0.201", annotations.LoadBalancerConfigs: "lb-b"}},
		{"public IP name", map[string]string{annotations.PIPName: "user-pip", annotations.LoadBalancerConfigs: "lb-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := multiEnv(t)
			ctx := ctxT(t)
			svc := service("c1cccccc-0000-0000-0000-000000000000", "both", tc.ann)
			before := e.writes(t)
			_, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
			want := `service default/both: service "both" has conflicting load balancer configuration: both a load balancer name (service.beta.kubernetes.io/azure-load-balancer-configurations) and an IP address are specified: `
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %v, want one opening with %q", err, want)
			}
			if !slices.ContainsFunc(drain(e), func(ev string) bool { return strings.Contains(ev, "Warning "+multislb.ReasonConflictingConfiguration) }) {
				t.Fatal("no Warning event")
			}
			if w := e.writes(t) - before; w != 0 {
				t.Fatalf("%d writes", w)
			}
		})
	}
	t.Run("one load balancer", func(t *testing.T) {
		e := newEnv(t, config.BackendPoolNodeIP)
		svc := service("c2cccccc-0000-0000-0000-000000000000", "one", map[string]string{annotations.Internal: "true",
			annotations.IPv4: "10.240.0.202", annotations.LoadBalancerConfigs: "lb-b"})
		st, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nodes)
		if err != nil || len(st.Ingress) != 1 || st.Ingress[0].IP != "10.240.0.202" {
			t.Fatalf("%v %v", st, err)
		}
	})
}

func TestMultiSLBLocalPool(t *testing.T) {
	e, idx := multiEnv(t)
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n1", "10.240.0.11", nil), node("n2", "10.240.0.12", nil), node("n3", "10.240.0.13", nil)}
	hosts := []string{"n2"}
	e.endpoints = func(ns, name string) ([]string, bool) { return hosts, true }
	svc := service("c1cccccc-0000-0000-0000-000000000000", "Loc", nil)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32000
	e.ensure(t, ctx, idx, svc, nodes)
	lb := e.lbOrNil(t, testCluster)
	if got := poolIPs(lb, "default-loc"); !slices.Equal(got, []string{"10.240.0.12"}) {
		t.Fatalf("local pool = %v", got)
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if !strings.HasSuffix(str(r.Properties.BackendAddressPool.ID), "/backendAddressPools/default-loc") {
			t.Fatalf("rule %s uses %s", str(r.Name), str(r.Properties.BackendAddressPool.ID))
		}
	}
	// Endpoints move: the updater's entry point rewrites the pool from the full set.
	hosts = []string{"n1", "n3"}
	res, err := e.placer.SyncLocalPool(ctx, testCluster, svc, nodes)
	if err != nil || res != multislb.LocalPoolUpdated {
		t.Fatalf("SyncLocalPool = %v, %v", res, err)
	}
	if got := poolIPs(e.lbOrNil(t, testCluster), "default-loc"); !slices.Equal(got, []string{"10.240.0.11", "10.240.0.13"}) {
		t.Fatalf("local pool = %v", got)
	}
	if res, err := e.placer.SyncLocalPool(ctx, testCluster, svc, nodes); err != nil || res != multislb.LocalPoolUnchanged {
		t.Fatalf("second SyncLocalPool = %v, %v", res, err)
	}
	// Back to Cluster: the dedicated pool goes.
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	svc.Spec.HealthCheckNodePort = 0
	e.ensure(t, ctx, idx, svc, nodes)
	if backends.FindPool(e.lbOrNil(t, testCluster), "default-loc") != nil {
		t.Fatal("dedicated pool left after the switch to Cluster")
	}
}

func drain(e *env) []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// A burst of new services spreads over the eligible load balancers: placement counts the rules
// of services placed but not yet written, not only those already on Azure.
func TestMultiSLBBurstSpreads(t *testing.T) {
	e, idx := multiEnv(t)
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n1", "10.240.0.11", nil)}
	const n = 20
	svcs := make([]*v1.Service, n)
	for i := range svcs {
		svcs[i] = service(fmt.Sprintf("d%07d-0000-0000-0000-000000000000", i), fmt.Sprintf("burst%d", i), nil,
			v1.ServicePort{Name: "p", Port: int32(1000 + i), NodePort: int32(31000 + i), Protocol: v1.ProtocolTCP})
		_ = idx.Add(svcs[i])
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range svcs {
		wg.Go(func() { _, errs[i] = e.lb.EnsureLoadBalancer(ctx, testCluster, s, nodes) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ensure %s: %v", svcs[i].Name, err)
		}
	}
	count := func(name string) int {
		lb := e.lbOrNil(t, name)
		if lb == nil || lb.Properties == nil {
			return 0
		}
		return len(lb.Properties.LoadBalancingRules)
	}
	def, b, a := count(testCluster), count("lb-b"), count("lb-a")
	if def+b != n || a != 0 {
		t.Fatalf("rules: %s %d, lb-b %d, lb-a %d; want %d over the first two", testCluster, def, b, a, n)
	}
	if def < n/4 || b < n/4 {
		t.Fatalf("burst not spread: %s has %d rules, lb-b %d", testCluster, def, b)
	}
	if n := e.placer.PendingRules(); n != 0 {
		t.Fatalf("pending placements left: %d rules", n)
	}
}

// Node placement is skipped when nothing it depends on changed, whatever the order of the
// service controller's node list: no read, no write.
func TestMultiSLBNodePlacementSettles(t *testing.T) {
	e, idx := multiEnv(t)
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n1", "10.240.0.11", nil), node("n2", "10.240.0.12", map[string]string{"lb": "a"}), node("n3", "10.240.0.13", nil)}
	e.ensure(t, ctx, idx, service("e1eeeeee-0000-0000-0000-000000000000", "fp", nil), nodes)
	base := plan.NewCluster(e.cfg, testCluster, nil)
	if err := e.placer.SyncNodes(ctx, base, nodes); err != nil { // settles (reads every LB)
		t.Fatal(err)
	}
	before := e.srv.Middleware().Stats().Requests
	if err := e.placer.SyncNodes(ctx, base, []*v1.Node{nodes[2], nodes[0], nodes[1]}); err != nil {
		t.Fatal(err)
	}
	if after := e.srv.Middleware().Stats().Requests; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a settled pass with the nodes reordered called ARM: %v → %v", before, after)
	}
	// A label change is a new input: the pass runs and moves n2 off lb-a.
	relabelled := []*v1.Node{nodes[0], node("n2", "10.240.0.12", nil), nodes[2]}
	if err := e.placer.SyncNodes(ctx, base, relabelled); err != nil {
		t.Fatal(err)
	}
	if got := poolIPs(e.lbOrNil(t, "lb-a"), testCluster); len(got) != 0 {
		t.Fatalf("lb-a still holds %v after n2 lost its label", got)
	}
}

// Node placement requests that find the load balancer caches dropped (a drift audit, a write
// that failed), made at once against azsim with the real writers: at most two passes between
// them, no write, one read per configured load balancer. (Sharing a pass itself is
// TestPassQueueCallersShareTheNextPass.)
func TestMultiSLBConcurrentNodeRequestsShareAPass(t *testing.T) {
	e, idx := multiEnv(t)
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n1", "10.240.0.11", nil), node("n2", "10.240.0.12", map[string]string{"lb": "a"}), node("n3", "10.240.0.13", nil)}
	e.ensure(t, ctx, idx, service("e2eeeeee-0000-0000-0000-000000000000", "share", nil), nodes)
	base := plan.NewCluster(e.cfg, testCluster, nil)
	if err := e.placer.SyncNodes(ctx, base, nodes); err != nil {
		t.Fatal(err)
	}
	lbs := e.buildOpts.Writers.LoadBalancers
	lbs.InvalidateAll()
	batches := func() (n int) {
		for _, c := range e.placer.Clusters(base) {
			for _, internal := range []bool{false, true} {
				n += lbs.For(c.LBID(c.LBName(internal))).Stats().Batches
			}
		}
		return n
	}
	lbCalls := func() (gets, writes int64) {
		for _, c := range e.srv.Middleware().Stats().Requests {
			if c.ResourceType != "Microsoft.Network/loadBalancers" && !strings.HasPrefix(c.ResourceType, "Microsoft.Network/loadBalancers/") {
				continue
			}
			if c.Method == "GET" {
				gets += c.Count
			} else {
				writes += c.Count
			}
		}
		return gets, writes
	}
	existing := 0
	for _, c := range e.placer.Clusters(base) {
		for _, internal := range []bool{false, true} {
			if e.lbOrNil(t, c.LBName(internal)) != nil {
				existing++
			}
		}
	}
	before := batches()
	gets0, writes0 := lbCalls()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = e.placer.SyncNodes(ctx, base, nodes) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// One pass submits one (no-op) pool batch per existing load balancer; the requests that
	// arrived meanwhile share at most one more pass.
	if b := batches() - before; b > 2*existing {
		t.Errorf("%d writer batches for 20 requests on %d load balancers, want at most two passes' worth", b, existing)
	}
	gets1, writes1 := lbCalls()
	gets, writes := gets1-gets0, writes1-writes0
	// One pass reads each of the six configured load balancers once (absent ones too); the
	// requests that arrived meanwhile share at most one more pass, which finds them cached.
	if writes != 0 || gets > 6 {
		t.Fatalf("20 concurrent requests: %d reads, %d writes of load balancers; want at most 6 reads and no write", gets, writes)
	}
}
