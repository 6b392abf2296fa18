package loadbalancer

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

func twoPorts(i int) []v1.ServicePort {
	return []v1.ServicePort{
		{Name: "a", Port: int32(1000 + 2*i), NodePort: int32(31000 + 2*i), Protocol: v1.ProtocolTCP},
		{Name: "b", Port: int32(1001 + 2*i), NodePort: int32(31001 + 2*i), Protocol: v1.ProtocolTCP},
	}
}

func ruleEvent(t *testing.T, e *env) string {
	t.Helper()
	for len(e.recorder.Events) > 0 {
		if ev := <-e.recorder.Events; strings.Contains(ev, "Warning "+multislb.ReasonRuleLimitReached) {
			return ev
		}
	}
	return ""
}

// One load balancer: the write that would pass maximumLoadBalancerRuleCount is refused with a
// Warning event before Azure sees it; the services already there keep reconciling.
func TestRuleLimitSingleLoadBalancer(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.MaximumLoadBalancerRuleCount = 5
	e.build(t, BuildOptions{})
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	for i := 0; i < 2; i++ {
		if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, service(fmt.Sprintf("f%07d-0000-0000-0000-000000000000", i), fmt.Sprintf("ok%d", i), nil, twoPorts(i)...), nodes); err != nil {
			t.Fatal(err)
		}
	}
	before := e.writes(t)
	for len(e.recorder.Events) > 0 {
		<-e.recorder.Events
	}
	third := service("f0000009-0000-0000-0000-000000000000", "full", nil, twoPorts(9)...)
	_, err := e.lb.EnsureLoadBalancer(ctx, testCluster, third, nodes)
	var rle *plan.RuleLimitError
	if !errors.As(err, &rle) || rle.Rules != 6 || rle.Max != 5 {
		t.Fatalf("error %v, want a RuleLimitError for 6 rules over 5", err)
	}
	if ev := ruleEvent(t, e); !strings.Contains(ev, "maximumLoadBalancerRuleCount 5") {
		t.Fatalf("event %q", ev)
	}
	lb := e.getLB(t, testCluster)
	if n := len(lb.Properties.LoadBalancingRules); n != 4 {
		t.Fatalf("%d rules on the load balancer, want 4", n)
	}
	// Only the refused service's public IP was written (it is released once the limit allows).
	if d := e.writes(t) - before; d > 1 {
		t.Fatalf("%d writes for the refused service", d)
	}
	// The services already there still reconcile (no rule added).
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, service("f0000000-0000-0000-0000-000000000000", "ok0", nil, twoPorts(0)...), nodes); err != nil {
		t.Fatal(err)
	}
}

// Several load balancers: 15 two-port services (30 rules) on two load balancers capped at 10
// rules each: 10 services land, no load balancer goes past 10, and the 5 that fit nowhere are
// refused with the event.
func TestRuleLimitMultipleLoadBalancers(t *testing.T) {
	e := newEnv(t, config.BackendPoolNodeIP)
	e.cfg.MaximumLoadBalancerRuleCount = 10
	e.cfg.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
		{Name: testCluster, PrimaryVMSet: "pool0"}, {Name: "lb-b", PrimaryVMSet: "pool-b"},
	}
	e.build(t, BuildOptions{})
	ctx := ctxT(t)
	nodes := []*v1.Node{node("n0", "10.240.0.4", nil)}
	const n = 15
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		svc := service(fmt.Sprintf("c%07d-0000-0000-0000-000000000000", i), fmt.Sprintf("s%d", i), nil, twoPorts(i)...)
		wg.Go(func() { _, errs[i] = e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes) })
	}
	wg.Wait()
	refused := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		var pe *placement.RuleLimitError
		var le *plan.RuleLimitError
		if !errors.As(err, &pe) && !errors.As(err, &le) {
			t.Fatalf("service %d: %v", i, err)
		}
		refused++
	}
	total := 0
	for _, name := range []string{testCluster, "lb-b"} {
		lb := e.lbOrNil(t, name)
		if lb == nil {
			t.Fatalf("load balancer %s missing", name)
		}
		r := len(lb.Properties.LoadBalancingRules)
		if r > 10 {
			t.Fatalf("%s has %d rules, more than 10", name, r)
		}
		total += r
	}
	if total != 20 || refused != 5 {
		t.Fatalf("%d rules placed and %d services refused, want 20 and 5", total, refused)
	}
	if ev := ruleEvent(t, e); ev == "" {
		t.Fatal("no LoadBalancerRuleLimitReached event")
	}
}
