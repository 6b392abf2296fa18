package loadbalancer

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// manyPorts are n TCP ports of service i, none shared with another service.
func manyPorts(i, n int) []v1.ServicePort {
	out := make([]v1.ServicePort, n)
	for j := range out {
		p := int32(1000 + i*n + j)
		out[j] = v1.ServicePort{Name: fmt.Sprintf("p%d", j), Port: p, NodePort: 30000 + p%2000, Protocol: v1.ProtocolTCP}
	}
	return out
}

func twoPorts(i int) []v1.ServicePort {
	return []v1.ServicePort{
		{Name: "a", Port: int32(1000 + 2*i), NodePort: int32(31000 + 2*i), Protocol: v1.ProtocolTCP},
		{Name: "b", Port: int32(1001 + 2*i), NodePort: int32(31001 + 2*i), Protocol: v1.ProtocolTCP},
	}
}

func ruleUID(i int) string { return fmt.Sprintf("c%07d-0000-0000-0000-000000000000", i) }

// ruleEvents drains the recorder and returns its LoadBalancerRuleLimitReached warnings.
func ruleEvents(e *env) []string {
	var out []string
	for len(e.recorder.Events) > 0 {
		if ev := <-e.recorder.Events; strings.Contains(ev, "Warning "+multislb.ReasonRuleLimitReached) {
			out = append(out, ev)
		}
	}
	return out
}

// pipExists reports whether the service's managed public IP exists.
func (e *env) pipExists(t *testing.T, svc *v1.Service) bool {
	t.Helper()
	_, err := e.net.NewPublicIPAddressesClient().Get(ctxT(t), testRG, testCluster+"-"+naming.ServiceLBName(svc.UID), nil)
	if err != nil && !strings.Contains(err.Error(), "ResourceNotFound") && !strings.Contains(err.Error(), "404") {
		t.Fatal(err)
	}
	return err == nil
}

// ensureAll reconciles the services at once and returns each one's error.
func (e *env) ensureAll(t *testing.T, svcs []*v1.Service, nodes []*v1.Node) []error {
	t.Helper()
	ctx := ctxT(t)
	errs := make([]error, len(svcs))
	var wg sync.WaitGroup
	for i, svc := range svcs {
		wg.Go(func() { _, errs[i] = e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes) })
	}
	wg.Wait()
	return errs
}

// 300 single-port services arrive at once on one Standard load balancer with
// maximumLoadBalancerRuleCount 250 in azure.json: every one gets its rule and public IP, as
// under the existing provider, which applies the key only among Basic load balancers. A service
// asking for the 1,501st rule is then refused before its public IP exists.
func TestRuleLimitKeyDoesNotCapStandard(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.MaximumLoadBalancerRuleCount = 250
	e.build(t, BuildOptions{})
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	var svcs []*v1.Service
	for i := 0; i < 300; i++ {
		svcs = append(svcs, service(ruleUID(i), fmt.Sprintf("s%d", i), nil, manyPorts(i, 1)...))
	}
	for i, err := range e.ensureAll(t, svcs, nodes) {
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
	}
	if n := plan.Rules(e.getLB(t, testCluster)); n != 300 {
		t.Fatalf("%d rules on the load balancer, want 300", n)
	}
	if evs := ruleEvents(e); len(evs) != 0 {
		t.Fatalf("refusals for 300 rules: %q", evs)
	}
	// 1,201 more rules make 1,501.
	big := service(ruleUID(1000), "big", nil, manyPorts(1, 1201)...)
	_, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, big, nodes)
	if !isRuleLimit(err) || !strings.Contains(err.Error(), "would have 1501 load balancing rules, more than Azure's limit of 1500 per Standard load balancer") {
		t.Fatalf("1,501 rules: %v, want the refusal naming Azure's limit", err)
	}
	if evs := ruleEvents(e); len(evs) != 1 || !strings.Contains(evs[0], "1501") {
		t.Fatalf("events %q, want one refusal", evs)
	}
	if e.pipExists(t, big) {
		t.Fatal("the refused service has a public IP")
	}
	if n := plan.Rules(e.getLB(t, testCluster)); n != 300 {
		t.Fatalf("%d rules on the load balancer after the refusal, want 300", n)
	}
}

// One Standard load balancer with maximumLoadBalancerRuleCount 250 (as generated azure.json files
// set it): the key limits nothing, Azure's 1,500 does. Sixteen services of 100 ports arrive at
// once: fifteen fill the load balancer to 1,500 rules, the sixteenth is refused with a Warning
// naming Azure's limit, and its public IP is never created (retries included). Once a service
// leaves, it gets in.
func TestRuleLimitSingleLoadBalancer(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.MaximumLoadBalancerRuleCount = 250
	e.build(t, BuildOptions{})
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	var svcs []*v1.Service
	for i := 0; i < 16; i++ {
		svcs = append(svcs, service(ruleUID(i), fmt.Sprintf("s%d", i), nil, manyPorts(i, 100)...))
	}
	var refused *v1.Service
	for i, err := range e.ensureAll(t, svcs, nodes) {
		if err == nil {
			continue
		}
		if !isRuleLimit(err) || refused != nil {
			t.Fatalf("service %d: %v", i, err)
		}
		refused = svcs[i]
	}
	if refused == nil {
		t.Fatal("all 16 services placed: 1,600 rules on one load balancer")
	}
	if n := len(e.getLB(t, testCluster).Properties.LoadBalancingRules); n != plan.MaxRules {
		t.Fatalf("%d rules on the load balancer, want %d", n, plan.MaxRules)
	}
	evs := ruleEvents(e)
	if len(evs) == 0 || !strings.Contains(evs[0], "more than Azure's limit of 1500 per Standard load balancer") {
		t.Fatalf("events %q, want one naming Azure's limit of 1500", evs)
	}
	if e.pipExists(t, refused) {
		t.Fatalf("service %s was refused but has a public IP", refused.Name)
	}
	// A retry writes nothing at all.
	before := e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, refused, nodes); !isRuleLimit(err) {
		t.Fatalf("retry: %v, want the rule limit", err)
	}
	if d := e.writes(t) - before; d != 0 || e.pipExists(t, refused) {
		t.Fatalf("the refused retry wrote %d times (public IP exists: %v)", d, e.pipExists(t, refused))
	}
	// The services already there still reconcile (no rule added).
	placed := svcs[0]
	if placed == refused {
		placed = svcs[1]
	}
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, placed, nodes); err != nil {
		t.Fatal(err)
	}
	if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, placed); err != nil {
		t.Fatal(err)
	}
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, refused, nodes); err != nil {
		t.Fatalf("after a service left: %v", err)
	}
	if !e.pipExists(t, refused) {
		t.Fatal("the admitted service has no public IP")
	}
}

// Several load balancers with maximumLoadBalancerRuleCount 10: the key guides nothing, so 15
// two-port services spread over both (fewest rules first) and none is refused. Azure's limit
// still holds per load balancer: two of them take 3,000 rules, and a service that fits on
// neither is refused before its public IP exists.
func TestRuleLimitMultipleLoadBalancers(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.MaximumLoadBalancerRuleCount = 10
	e.cfg.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
		{Name: testCluster, PrimaryVMSet: "pool0"}, {Name: "lb-b", PrimaryVMSet: "pool-b"},
	}
	e.build(t, BuildOptions{})
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	var small []*v1.Service
	for i := 0; i < 15; i++ {
		small = append(small, service(ruleUID(i), fmt.Sprintf("small%d", i), nil, twoPorts(i)...))
	}
	for i, err := range e.ensureAll(t, small, nodes) {
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
	}
	a, b := plan.Rules(e.lbOrNil(t, testCluster)), plan.Rules(e.lbOrNil(t, "lb-b"))
	if a+b != 30 || a < 14 || b < 14 {
		t.Fatalf("rules %d and %d, want 30 spread evenly", a, b)
	}
	for _, svc := range small {
		if err := e.lb.EnsureLoadBalancerDeleted(ctxT(t), testCluster, svc); err != nil {
			t.Fatal(err)
		}
	}
	// Six 500-port services, one after the other: fewest rules first fills both to 1,500.
	for i := 0; i < 6; i++ {
		svc := service(ruleUID(100+i), fmt.Sprintf("big%d", i), nil, manyPorts(i, 500)...)
		if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, nodes); err != nil {
			t.Fatalf("big service %d: %v", i, err)
		}
	}
	a, b = plan.Rules(e.lbOrNil(t, testCluster)), plan.Rules(e.lbOrNil(t, "lb-b"))
	if a != plan.MaxRules || b != plan.MaxRules {
		t.Fatalf("rules %d and %d, want %d each", a, b, plan.MaxRules)
	}
	ruleEvents(e)
	last := service(ruleUID(300), "last", nil, manyPorts(7000, 1)...)
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, last, nodes); !isRuleLimit(err) {
		t.Fatalf("3,001st rule: %v, want the rule limit", err)
	}
	if evs := ruleEvents(e); len(evs) == 0 || !strings.Contains(evs[0], "under Azure's limit of 1500 per Standard load balancer") {
		t.Fatalf("events %q", evs)
	}
	if e.pipExists(t, last) {
		t.Fatal("the refused service has a public IP")
	}
}
