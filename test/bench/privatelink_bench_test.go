//go:build bench

package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// The private link service burst; BENCH_PLS_* shrink it.
var (
	plsServices = envInt("BENCH_PLS_SERVICES", 50)
	plsNodes    = envInt("BENCH_PLS_NODES", 16)
	plsBudget   = time.Duration(envInt("BENCH_PLS_BUDGET_SECONDS", 1200)) * time.Second
)

// plsPerLB is Azure's limit of private link services on one load balancer.
const plsPerLB = 8

// TestPrivateLinkBurst: internal LoadBalancer services asking for a private link service,
// created at once. One load balancer takes at most 8 private link services, so the services
// need several load balancers (multipleStandardLoadBalancerConfigurations): placement keeps
// each under the limit. The result has the time until every service has its IP (its private
// link service is created before the status is set) and the ARM writes per resource type
// against the minimum: one PUT per private link service, one subnet write for the shared NAT
// subnet, load balancer writes merged as for services.
func TestPrivateLinkBurst(t *testing.T) {
	lbs := (plsServices + plsPerLB - 1) / plsPerLB
	names := mslbNames(lbs)
	nodes := max(plsNodes, lbs)
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: mslbScaleTopology(nodes, lbs), StartupTimeout: 5 * time.Minute,
		ClusterExtraArgs: clusterArgs, CloudConfig: mslbScaleConfig(names)})
	b := &bench{t: t, env: env}
	b.createNodes(env.Machines)
	env.StartCCM()
	b.waitNodesInitialized(nodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	res := newResult("pls-burst", "Burst of services with a private link service", "TestPrivateLinkBurst",
		"BENCH_PLS_SERVICES", "BENCH_PLS_NODES")
	res.Description = fmt.Sprintf("%d internal LoadBalancer services (one TCP port each) with `azure-pls-create: \"true\"`, created at once "+
		"on %d KWOK nodes. A load balancer takes at most %d private link services, so `multipleStandardLoadBalancerConfigurations` has "+
		"%d entries (%s). Latency model of the burst (LB PUT 1 s, PIP PUT 0.5 s, NSG PUT 0.5 s, other writes 0.3 s, GET 50 ms). "+
		"Time from the first create to the last service with an IP: the CCM creates a service's private link service before it sets "+
		"the status, so that is the time to every private link service ready.", plsServices, nodes, plsPerLB, lbs, strings.Join(names, ", "))
	res.Config = map[string]string{"nodes": fmt.Sprint(nodes), "services": fmt.Sprint(plsServices), "load balancer configurations": fmt.Sprint(lbs),
		"backend pool type": "nodeIP", "latency": "LB PUT 1s, PIP PUT 0.5s, NSG PUT 0.5s, other writes 0.3s, deletes 0.3s, GET 50ms",
		"progress": "services with an IP (and their private link service)"}

	var svcs []*corev1.Service
	for i := range plsServices {
		s := service("pls", fmt.Sprintf("pls-%03d", i), int32(1000+i))
		s.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true",
			"service.beta.kubernetes.io/azure-pls-create": "true"}
		svcs = append(svcs, s)
	}
	m := b.meter()
	began := time.Now()
	b.createServices("pls", svcs)
	d, curve := b.waitIngress("pls", plsServices, began, plsBudget)
	got := int(curve.Y[len(curve.Y)-1])
	ph := m.phase(fmt.Sprintf("%d services with a private link service", plsServices), "ours", d.Seconds())
	curve.Name = "ours"
	ph.Series = []report.Series{curve}

	docs, err := env.Azsim.List(b.ctx(), "Microsoft.Network/privateLinkServices")
	if err != nil {
		t.Fatal(err)
	}
	ready, perLB := 0, map[string]int{}
	for _, p := range docs {
		props, _ := p["properties"].(map[string]any)
		if st, _ := props["provisioningState"].(string); st == "Succeeded" {
			ready++
		}
		fes, _ := props["loadBalancerFrontendIpConfigurations"].([]any) // ARM's spelling
		if len(fes) == 0 {
			t.Errorf("private link service %v names no load balancer frontend", p["name"])
		}
		for _, fe := range fes {
			id, _ := fe.(map[string]any)["id"].(string)
			parts := strings.Split(id, "/")
			if len(parts) > 2 {
				perLB[parts[len(parts)-3]]++
			}
		}
	}
	fullest := 0
	for _, n := range perLB {
		fullest = max(fullest, n)
	}
	ph.Metrics["services with an IP"] = float64(got)
	ph.Metrics["private link services ready"] = float64(ready)
	ph.Metrics["private link services on the fullest load balancer"] = float64(fullest)
	res.Phases = []report.Phase{ph}
	plsW := ph.Of("privateLinkServices").Writes
	subnetW := ph.Of("virtualNetworks/subnets").Writes
	lbW := ph.Of("loadBalancers").Writes + ph.Of("loadBalancers/backendAddressPools").Writes
	res.Goals = []report.Goal{
		{Name: "every private link service ready", Want: fmt.Sprintf("%d within %s", plsServices, plsBudget),
			Got: fmt.Sprintf("%d in %.0f s", ready, d.Seconds()), Met: ready >= plsServices && got >= plsServices},
		{Name: "private link service writes", Want: fmt.Sprintf("%d (one PUT each)", plsServices), Got: fmt.Sprint(plsW), Met: plsW == int64(plsServices)},
		{Name: "NAT subnet writes", Want: "1", Got: fmt.Sprint(subnetW), Met: subnetW <= 1},
		{Name: "private link services on one load balancer", Want: fmt.Sprintf("≤ %d", plsPerLB), Got: fmt.Sprint(fullest), Met: fullest <= plsPerLB},
	}
	res.Headline = []string{fmt.Sprintf("%d services with a private link service over %d load balancers: all ready after %.0f s; %d private link service PUTs, %d subnet writes, %d load balancer writes (pools included), %d ARM reads in all",
		plsServices, lbs, d.Seconds(), plsW, subnetW, lbW, ph.ARMTotal.Reads)}
	writeResult(t, res)
	for _, g := range res.Goals {
		if !g.Met {
			t.Errorf("goal missed: %s: want %s, got %s", g.Name, g.Want, g.Got)
		}
	}
}
