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
	largeNodes    = envInt("BENCH_LARGE_NODES", 5000)
	largeServices = envInt("BENCH_LARGE_SERVICES", 1000)
	largeSteady   = time.Duration(envInt("BENCH_LARGE_STEADY_SECONDS", 120)) * time.Second
	// largeBudget bounds the wait for the services; what converged by then is recorded.
	largeBudget = time.Duration(envInt("BENCH_LARGE_BUDGET_SECONDS", 2400)) * time.Second
	// largeExtraFlags are more CCM flags (space-separated), e.g. "--drift-audit-period=0" to
	// measure a variant; they are named in the result.
	largeExtraFlags = strings.Fields(os.Getenv("BENCH_LARGE_CCM_FLAGS"))
	// largeGoMemLimit is the CCM's GOMEMLIMIT (e.g. "410MiB", the chart's default); unset by
	// default, as earlier runs were. Named in the result.
	largeGoMemLimit = os.Getenv("BENCH_LARGE_GOMEMLIMIT")
)

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
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: largeTopology(largeNodes), StartupTimeout: 10 * time.Minute,
		ClusterExtraArgs: clusterArgs, CloudConfig: nodeIPConfig()})
	b := &bench{t: t, env: env}
	res := newResult("large-cluster", "5,000 nodes and 1,000 services: CCM memory and CPU", "TestLargeCluster",
		"BENCH_LARGE_NODES", "BENCH_LARGE_SERVICES", "BENCH_LARGE_STEADY_SECONDS")
	if len(largeExtraFlags) > 0 {
		res.Command = "BENCH_LARGE_CCM_FLAGS='" + strings.Join(largeExtraFlags, " ") + "' " + res.Command
	}
	goMemLimit := "unset"
	if largeGoMemLimit != "" {
		res.Command = "BENCH_LARGE_GOMEMLIMIT=" + largeGoMemLimit + " " + res.Command
		goMemLimit = largeGoMemLimit
		env.SetCCMEnv("GOMEMLIMIT=" + largeGoMemLimit)
	}
	res.Description = fmt.Sprintf("%d KWOK nodes in %d scale sets of up to 1,000 instances, then %d LoadBalancer services created at "+
		"once (half public on `kubernetes`, half internal on `kubernetes-internal`, one TCP port each; `nodeIP` pools of all "+
		"%d nodes), then %s of steady state with the default sync periods. The CCM's CPU seconds and peak RSS (VmHWM) per "+
		"phase, from `/proc`. Latency model of the burst once the nodes are initialised.",
		largeNodes, len(env.Opts.Topology.ScaleSets), largeServices, largeNodes, largeSteady)
	if largeGoMemLimit != "" {
		res.Description += " The CCM runs with `GOMEMLIMIT=" + largeGoMemLimit + "` (the chart's default is 410MiB)."
	}
	res.Config = map[string]string{"nodes": fmt.Sprint(largeNodes), "services": fmt.Sprint(largeServices),
		"steady state": largeSteady.String(), "backend pool type": "nodeIP", "CCM flags": strings.Join(append([]string{"--concurrent-node-syncs=10"}, largeExtraFlags...), " "), "progress": "services with an IP", "CCM GOMEMLIMIT": goMemLimit}

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
