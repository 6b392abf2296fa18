//go:build bench

package bench

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// Full ARM types the NIC-pool burst's minimum is computed for.
const (
	typePIP     = "Microsoft.Network/publicIPAddresses"
	typeLB      = "Microsoft.Network/loadBalancers"
	typeNSG     = "Microsoft.Network/networkSecurityGroups"
	typeSSVM    = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
	typeSS      = "Microsoft.Compute/virtualMachineScaleSets"
	reasonFails = "SyncLoadBalancerFailed"
)

// TestLoadBalancerBurstNICPools: the burst of TestLoadBalancerBurst (same sizes and latency
// model) with NIC-based backend pools — loadBalancerBackendPoolConfigurationType left at its
// default, nodeIPConfiguration — and the CCM's default flags and azure.json, as a cluster
// switching from the existing provider runs it. Every node's scale set instance joins the cluster pool, so the
// instance writes change the load balancer (its pool's back-references) while services write it.
// Reported: reads and writes per resource type against the fewest that could do the work, 404
// public IP lookups, 412s on load balancer writes, SyncLoadBalancerFailed events.
func TestLoadBalancerBurstNICPools(t *testing.T) {
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = benchNodes
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs})
	b := &bench{t: t, env: env}
	b.createNodes(env.Machines)
	env.StartCCM()
	b.waitNodesInitialized(benchNodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	sizeKeys := []string{"BENCH_NODES", "BENCH_SERVICES"}
	res := newResult("lb-burst-nic-pools", "Burst of LoadBalancer services, NIC-based pools", "TestLoadBalancerBurstNICPools", sizeKeys...)
	res.Description = fmt.Sprintf("%d LoadBalancer services (one TCP port each) created at once on %d KWOK nodes of one scale set, "+
		"with NIC-based backend pools (`loadBalancerBackendPoolConfigurationType` unset: `nodeIPConfiguration`) and the CCM's "+
		"default flags. Same latency model as the burst above. Time from the first create to the last service with an IP; "+
		"every request by resource type against the fewest that could do the work.", benchServices, benchNodes)
	res.Config = map[string]string{"nodes": fmt.Sprint(benchNodes), "services": fmt.Sprint(benchServices),
		"backend pool type": "nodeIPConfiguration (default)", "flags": "defaults"}

	m := b.meter()
	d, curve := b.burst("burst", benchServices)
	p := m.phase("burst", "ours", d.Seconds())
	curve.Name = "ours"
	p.Series = []report.Series{curve}
	s := b.stats()
	pip404 := s.Sum("GET", typePIP, http.StatusNotFound)
	lb412 := s.Sum("PUT", typeLB, http.StatusPreconditionFailed)
	fails := b.warningEvents("burst", reasonFails)
	p.Metrics["public IP GETs answered 404"] = float64(pip404)
	p.Metrics["load balancer PUTs answered 412"] = float64(lb412)
	p.Metrics["SyncLoadBalancerFailed events"] = float64(fails)
	p.Minimum = map[string]report.Counts{
		typePIP:  {Reads: 1, Writes: int64(benchServices)},
		typeLB:   {Reads: 1, Writes: 1},
		typeNSG:  {Reads: 1, Writes: 1},
		typeSSVM: {Reads: 1, Writes: int64(benchNodes)},
		typeSS:   {Reads: 1, Writes: 1},
	}
	p.MinimumWhy = "one LIST of public IPs and one PUT per service's public IP; one read and one write of the load balancer and of " +
		"the NSG (every rule in one document); one LIST of the scale set's instances and one write per instance (its ip " +
		"configuration joins the pool); one read and one write of the scale set model (new instances join too). Operation " +
		"status polls (their own type) are left out: every asynchronous write has them."
	res.Phases = []report.Phase{p}
	var made, least report.Counts
	for typ, min := range p.Minimum {
		made, least = made.Add(p.Of(typ)), least.Add(min)
	}
	ratio := float64(made.Writes) / float64(least.Writes)
	res.Goals = []report.Goal{
		{Name: "public IP lookups answered 404", Want: "0", Got: fmt.Sprint(pip404), Met: pip404 == 0},
		{Name: "load balancer writes answered 412", Want: "0", Got: fmt.Sprint(lb412), Met: lb412 == 0},
		{Name: "SyncLoadBalancerFailed events", Want: "0", Got: fmt.Sprint(fails), Met: fails == 0},
		{Name: "writes against the minimum", Want: "≤ 1.02×", Got: fmt.Sprintf("%.2f× (%d / %d)", ratio, made.Writes, least.Writes), Met: ratio <= 1.02},
	}
	res.Headline = []string{fmt.Sprintf("%d services on %d nodes with NIC-based pools: all IPs in %.0f s; %d writes against a minimum of %d "+
		"(%.2f×), %d reads; %d 404 public IP lookups, %d load balancer 412s, %d SyncLoadBalancerFailed events",
		benchServices, benchNodes, d.Seconds(), made.Writes, least.Writes, ratio, made.Reads, pip404, lb412, fails)}
	writeResult(t, res)
	for _, g := range res.Goals {
		if !g.Met {
			t.Errorf("goal missed: %s: want %s, got %s", g.Name, g.Want, g.Got)
		}
	}
}

// warningEvents counts the Warning events of a reason in namespace ns (each event's count).
func (b *bench) warningEvents(ns, reason string) int {
	list, err := b.env.Kube.CoreV1().Events(ns).List(b.ctx(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		b.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n
}
