//go:build bench

package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

var (
	largeNodes    = envInt("BENCH_LARGE_NODES", publishedLargeNodes)
	largeServices = envInt("BENCH_LARGE_SERVICES", 1000)
	largeSteady   = time.Duration(envInt("BENCH_LARGE_STEADY_SECONDS", 120)) * time.Second
	// largeBudget bounds the wait for the services; what converged by then is recorded.
	largeBudget = time.Duration(envInt("BENCH_LARGE_BUDGET_SECONDS", 2400)) * time.Second
	// largeExtraFlags are more CCM flags (space-separated), e.g. "--drift-audit-period=0" to
	// measure a variant; they are named in the result.
	largeExtraFlags = strings.Fields(os.Getenv("BENCH_LARGE_CCM_FLAGS"))
	// largeGoMemLimit is the CCM's GOMEMLIMIT (e.g. "320MiB", the chart's default); unset by
	// default, as earlier runs were. Named in the result.
	largeGoMemLimit = os.Getenv("BENCH_LARGE_GOMEMLIMIT")
	// largeLBs is how many load balancer configurations share the nodes and services.
	largeLBs = envInt("BENCH_LARGE_LBS", defaultLargeLBs(largeNodes, largeServices))
)

// publishedLargeNodes is the size of the published "large-cluster" result; larger runs need
// several load balancers and are kept under their own name.
const publishedLargeNodes = 5000

// defaultLargeLBs is one load balancer while Azure's limits allow it (5,000 addresses in a
// backend pool, 600 frontends on a load balancer, the services split evenly between public and
// internal), else enough multiple-load-balancer configurations to stay under them with
// headroom: at most 4,000 nodes and 500 frontends of each kind per configuration.
func defaultLargeLBs(nodes, services int) int {
	perKind := (services + 1) / 2
	if nodes <= publishedLargeNodes && perKind <= 600 {
		return 1
	}
	return max((nodes+3999)/4000, (perKind+499)/500)
}

// largeScenario names the result: the published 5,000-node run is "large-cluster"; a larger
// one is kept beside it under its node count instead of replacing it.
func largeScenario(nodes, services int) (scenario, title string) {
	if nodes <= publishedLargeNodes {
		return "large-cluster", "5,000 nodes and 1,000 services: CCM memory and CPU"
	}
	return fmt.Sprintf("large-cluster-%d", nodes), fmt.Sprintf("%s nodes and %s services: CCM memory and CPU", thousands(nodes), thousands(services))
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// largeTopology spreads n machines over scale sets of at most 1,000 instances (Azure's limit)
// in a /16 node subnet.
func largeTopology(n int) *topology.Topology {
	topo := framework.DefaultTopology()
	topo.VirtualNetworks[0].AddressPrefixes = []string{"10.0.0.0/8"}
	topo.VirtualNetworks[0].Subnets[0].AddressPrefix = "10.1.0.0/16"
	rg := topo.ScaleSets[0].ResourceGroup
	topo.ScaleSets = nil
	for i := 0; n > 0; i++ {
		c := min(n, 1000)
		topo.ScaleSets = append(topo.ScaleSets, topology.ScaleSet{ResourceGroup: rg, Name: fmt.Sprintf("pool%d", i), Capacity: c, Zones: []string{"1", "2", "3"}})
		n -= c
	}
	return topo
}

// TestLargeCluster: 5,000 nodes in five scale sets and 1,000 LoadBalancer services (half
// public, half internal: a Standard load balancer holds at most 600 frontends); the CCM's CPU
// time and peak memory while it initialises the nodes, while it converges the services and in
// a steady state after.
func TestLargeCluster(t *testing.T) {
	cloudConfig := nodeIPConfig()
	if largeLBs > 1 {
		cloudConfig = mslbScaleConfig(mslbNames(largeLBs))
	}
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: largeTopology(largeNodes), StartupTimeout: 10 * time.Minute,
		ClusterExtraArgs: clusterArgs, CloudConfig: cloudConfig})
	b := &bench{t: t, env: env}
	scenario, title := largeScenario(largeNodes, largeServices)
	res := newResult(scenario, title, "TestLargeCluster",
		"BENCH_LARGE_NODES", "BENCH_LARGE_SERVICES", "BENCH_LARGE_STEADY_SECONDS", "BENCH_LARGE_LBS")
	if largeNodes > publishedLargeNodes {
		// Larger than the default, not reduced: the overrides stay in the command.
		res.Reduced = false
	}
	if len(largeExtraFlags) > 0 {
		res.Command = "BENCH_LARGE_CCM_FLAGS='" + strings.Join(largeExtraFlags, " ") + "' " + res.Command
	}
	goMemLimit := "unset"
	if largeGoMemLimit != "" {
		res.Command = "BENCH_LARGE_GOMEMLIMIT=" + largeGoMemLimit + " " + res.Command
		goMemLimit = largeGoMemLimit
		env.SetCCMEnv("GOMEMLIMIT=" + largeGoMemLimit)
	}
	placement := fmt.Sprintf("half public on `kubernetes`, half internal on `kubernetes-internal`, one TCP port each; `nodeIP` pools of all %d nodes", largeNodes)
	if largeLBs > 1 {
		placement = "half public, half internal, one TCP port each; `nodeIP` pools"
	}
	res.Description = fmt.Sprintf("%d KWOK nodes in %d scale sets of up to 1,000 instances, then %d LoadBalancer services created at "+
		"once (%s), then %s of steady state with the default sync periods. The CCM's CPU seconds and peak RSS (VmHWM) per "+
		"phase, from `/proc`. Latency model of the burst once the nodes are initialised.",
		largeNodes, len(env.Opts.Topology.ScaleSets), largeServices, placement, largeSteady)
	if largeLBs > 1 {
		res.Description += fmt.Sprintf(" A backend pool holds at most 5,000 addresses and a load balancer 600 frontends, so the services "+
			"and nodes are spread over %d load balancer configurations (`multipleStandardLoadBalancerConfigurations` %s, each the "+
			"primaryVMSet of one scale set; the other nodes go to the one with the fewest, services to the one with the fewest rules).",
			largeLBs, strings.Join(mslbNames(largeLBs), ", "))
	}
	if largeGoMemLimit != "" {
		res.Description += " The CCM runs with `GOMEMLIMIT=" + largeGoMemLimit + "` (the chart's default is 320MiB)."
	}
	res.Config = map[string]string{"nodes": fmt.Sprint(largeNodes), "services": fmt.Sprint(largeServices),
		"steady state": largeSteady.String(), "backend pool type": "nodeIP", "CCM flags": strings.Join(append([]string{"--concurrent-node-syncs=10"}, largeExtraFlags...), " "), "progress": "services with an IP", "CCM GOMEMLIMIT": goMemLimit,
		"load balancer configurations": fmt.Sprint(largeLBs)}

	b.createNodes(env.Machines)
	// Ten node workers instead of upstream's default one, as a cluster of this size is run.
	env.StartCCM(append([]string{"--concurrent-node-syncs=10"}, largeExtraFlags...)...)
	m := b.meter()
	t0 := time.Now()
	b.waitNodesInitialized(largeNodes, 30*time.Minute)
	initPhase := m.phase(fmt.Sprintf("initialise %d nodes", largeNodes), "ours", time.Since(t0).Seconds())

	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	var svcs []*corev1.Service
	for i := range largeServices {
		s := service("apps", fmt.Sprintf("svc-%04d", i), int32(1000+i))
		if i%2 == 1 {
			s.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
		}
		svcs = append(svcs, s)
	}
	m = b.meter()
	t0 = time.Now()
	b.createServices("apps", svcs)
	d, curve := b.waitIngress("apps", largeServices, t0, largeBudget)
	got := int(curve.Y[len(curve.Y)-1])
	svcPhase := m.phase(fmt.Sprintf("%d services (%d with an IP)", largeServices, got), "ours", d.Seconds())
	svcPhase.Metrics["services with an IP"] = float64(got)
	svcPhase.Metrics["services per minute"] = float64(got) / (d.Seconds() / 60)
	curve.Name = "ours"
	svcPhase.Series = []report.Series{curve}

	m = b.meter()
	t0 = time.Now()
	select {
	case <-time.After(largeSteady):
	case <-env.CCM().Done():
		t.Fatalf("the CCM exited; see %s", env.CCMLogPath())
	}
	name := "steady state " + largeSteady.String()
	if got < largeServices {
		name = largeSteady.String() + " more, services still converging"
	}
	steady := m.phase(name, "ours", time.Since(t0).Seconds())
	res.Phases = []report.Phase{initPhase, svcPhase, steady}
	peak := max(initPhase.PeakRSS(), svcPhase.PeakRSS(), steady.PeakRSS())
	w := steady.ARMTotal.Writes + steady.ARMTotal.Deletes
	res.Goals = []report.Goal{{Name: "every service has an IP", Want: fmt.Sprintf("%d within %s", largeServices, largeBudget),
		Got: fmt.Sprintf("%d in %.0f s", got, svcPhase.Seconds), Met: got >= largeServices}}
	if got >= largeServices {
		res.Goals = append(res.Goals, report.Goal{Name: "ARM writes in the steady state", Want: "0", Got: fmt.Sprint(w), Met: w == 0})
	}
	res.Headline = []string{fmt.Sprintf("%d nodes: CCM peak RSS %.0f MiB; %.0f CPU s to initialise the nodes (%.0f s); %d of %d services with an IP after %.0f s (%.1f per minute, %.0f CPU s)",
		largeNodes, peak, initPhase.CPU(), initPhase.Seconds, got, largeServices, svcPhase.Seconds, svcPhase.Metrics["services per minute"], svcPhase.CPU())}
	writeResult(t, res)
	if got >= largeServices && w != 0 {
		t.Errorf("steady state made %d ARM writes", w)
	}
}
