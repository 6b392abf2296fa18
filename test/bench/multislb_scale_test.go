//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// The multiple-load-balancer scale run; BENCH_MSLB_* shrink it.
var (
	mslbServices = envInt("BENCH_MSLB_SERVICES", 1000)
	mslbNodes    = envInt("BENCH_MSLB_NODES", 100)
	mslbLBs      = envInt("BENCH_MSLB_LBS", 4)
	// mslbBudget bounds the wait for the services; what converged by then is recorded.
	mslbBudget = time.Duration(envInt("BENCH_MSLB_BUDGET_SECONDS", 3600)) * time.Second
)

// mslbRuleLimit is the rules a NIC (so a node, so one load balancer's pool) may take.
const mslbRuleLimit = 300

// mslbNames are the load balancer configurations: the cluster's own, then lb-2, lb-3, ...
func mslbNames(n int) []string {
	names := []string{"kubernetes"}
	for i := 2; i <= n; i++ {
		names = append(names, fmt.Sprintf("lb-%d", i))
	}
	return names
}

// mslbScaleTopology gives every load balancer configuration a scale set of its own (its
// primaryVMSet), as agent pools of a cluster spread over load balancers are.
func mslbScaleTopology(nodes, lbs int) *topology.Topology {
	topo := framework.DefaultTopology()
	rg := topo.ScaleSets[0].ResourceGroup
	topo.ScaleSets = nil
	for i := range lbs {
		c := nodes / lbs
		if i < nodes%lbs {
			c++
		}
		topo.ScaleSets = append(topo.ScaleSets, topology.ScaleSet{ResourceGroup: rg, Name: fmt.Sprintf("pool%d", i), Capacity: c, Zones: []string{"1", "2", "3"}})
	}
	return topo
}

func mslbScaleConfig(names []string) map[string]any {
	var entries []map[string]any
	for i, n := range names {
		entries = append(entries, map[string]any{"name": n, "primaryVMSet": fmt.Sprintf("pool%d", i)})
	}
	return map[string]any{"loadBalancerBackendPoolConfigurationType": "nodeIP", "multipleStandardLoadBalancerConfigurations": entries}
}

// mslbView is what azsim holds per load balancer after the run.
type mslbView struct {
	rules, frontends, nodes int
}

func (b *bench) mslbViews(ctx context.Context) (map[string]mslbView, error) {
	docs, err := b.env.Azsim.List(ctx, "Microsoft.Network/loadBalancers")
	if err != nil {
		return nil, err
	}
	out := map[string]mslbView{}
	for _, d := range docs {
		name, _ := d["name"].(string)
		props, _ := d["properties"].(map[string]any)
		rules, _ := props["loadBalancingRules"].([]any)
		fes, _ := props["frontendIPConfigurations"].([]any)
		v := mslbView{rules: len(rules), frontends: len(fes)}
		pools, _ := props["backendAddressPools"].([]any)
		for _, p := range pools {
			pm, _ := p.(map[string]any)
			if pn, _ := pm["name"].(string); pn != "kubernetes" {
				continue
			}
			pp, _ := pm["properties"].(map[string]any)
			addrs, _ := pp["loadBalancerBackendAddresses"].([]any)
			v.nodes = len(addrs)
		}
		out[name] = v
	}
	return out, nil
}

// TestMultiSLBScale: 1,000 single-port LoadBalancer services created at once over four load
// balancer configurations (multipleStandardLoadBalancerConfigurations) on 100 nodes — more
// than one load balancer's 300 rules. Every service must get an IP; the result has the time
// to converge, the ARM requests per load balancer (azsim's counters by addressed resource:
// a load balancer's backend pool writes count for it) and the rules on each.
func TestMultiSLBScale(t *testing.T) {
	names := mslbNames(mslbLBs)
	topo := mslbScaleTopology(mslbNodes, mslbLBs)
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute,
		ClusterExtraArgs: clusterArgs, CloudConfig: mslbScaleConfig(names)})
	b := &bench{t: t, env: env}
	b.createNodes(env.Machines)
	env.StartCCM()
	b.waitNodesInitialized(mslbNodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	res := newResult("multislb-scale", "Multiple standard load balancers at scale", "TestMultiSLBScale",
		"BENCH_MSLB_SERVICES", "BENCH_MSLB_NODES", "BENCH_MSLB_LBS")
	res.Description = fmt.Sprintf("%d LoadBalancer services (one TCP port each, no placement annotation) created at once on %d KWOK "+
		"nodes, with `multipleStandardLoadBalancerConfigurations` of %d entries (%s), each the primary VM set of one scale set "+
		"of %d nodes (`nodeIP` pools). One load balancer takes at most %d rules per node, so the services need several. "+
		"Placement picks the eligible load balancer with the fewest rules. Latency model of the burst (LB PUT 1 s, PIP PUT "+
		"0.5 s, NSG PUT 0.5 s, other writes 0.3 s, GET 50 ms). Time from the first create to the last service with an IP; "+
		"ARM requests per load balancer count the requests addressed to it or its children (backend pools).",
		mslbServices, mslbNodes, mslbLBs, strings.Join(names, ", "), mslbNodes/mslbLBs, mslbRuleLimit)
	res.Config = map[string]string{"nodes": fmt.Sprint(mslbNodes), "services": fmt.Sprint(mslbServices),
		"load balancer configurations": fmt.Sprint(mslbLBs), "backend pool type": "nodeIP",
		"latency": "LB PUT 1s, PIP PUT 0.5s, NSG PUT 0.5s, other writes 0.3s, deletes 0.3s, GET 50ms", "progress": "services with an IP"}

	var svcs []*corev1.Service
	for i := range mslbServices {
		svcs = append(svcs, service("apps", fmt.Sprintf("svc-%04d", i), int32(1000+i)))
	}
	m := b.meter()
	began := time.Now()
	b.createServices("apps", svcs)
	d, curve := b.waitIngress("apps", mslbServices, began, mslbBudget)
	got := int(curve.Y[len(curve.Y)-1])
	ph := m.phase(fmt.Sprintf("%d services over %d load balancers", mslbServices, mslbLBs), "ours", d.Seconds())
	curve.Name = "ours"
	ph.Series = []report.Series{curve}
	ph.Metrics["services with an IP"] = float64(got)
	ph.Metrics["services per minute"] = float64(got) / (d.Seconds() / 60)

	stats := b.stats()
	views, err := b.mslbViews(b.ctx())
	if err != nil {
		t.Fatal(err)
	}
	ph.Resources = map[string]report.Counts{}
	maxRules, minRules, total := 0, mslbServices+1, 0
	var perLB []string
	lbNames := append([]string(nil), names...)
	for n := range views { // internal counterparts, if any service went internal
		if !slices.Contains(lbNames, n) {
			lbNames = append(lbNames, n)
		}
	}
	sort.Strings(lbNames)
	for _, n := range lbNames {
		c := report.Counts{
			Reads:   stats.ByResource(middleware.Read, "loadBalancers", "", n),
			Writes:  stats.ByResource(middleware.Write, "loadBalancers", "", n) + stats.ByResource(middleware.Action, "loadBalancers", "", n),
			Deletes: stats.ByResource(middleware.Delete, "loadBalancers", "", n),
		}
		ph.Resources["loadBalancers/"+n] = c
		v := views[n]
		ph.Metrics["rules on "+n] = float64(v.rules)
		ph.Metrics["nodes in the pool of "+n] = float64(v.nodes)
		maxRules, minRules, total = max(maxRules, v.rules), min(minRules, v.rules), total+v.rules
		perLB = append(perLB, fmt.Sprintf("%s %d rules / %d writes", n, v.rules, c.Writes))
	}
	res.Phases = []report.Phase{ph}
	lbW := ph.Of("loadBalancers").Writes + ph.Of("loadBalancers/backendAddressPools").Writes
	res.Goals = []report.Goal{
		{Name: "every service has an IP", Want: fmt.Sprintf("%d within %s", mslbServices, mslbBudget),
			Got: fmt.Sprintf("%d in %.0f s", got, d.Seconds()), Met: got >= mslbServices},
		{Name: "rules on the fullest load balancer", Want: fmt.Sprintf("≤ %d", mslbRuleLimit), Got: fmt.Sprint(maxRules), Met: maxRules <= mslbRuleLimit},
		{Name: "rules on all load balancers", Want: fmt.Sprint(mslbServices), Got: fmt.Sprint(total), Met: total == mslbServices},
	}
	res.Headline = []string{fmt.Sprintf("%d services over %d load balancers on %d nodes: %d with an IP after %.0f s; %d load balancer writes (pools included), %d ARM reads in all; %s",
		mslbServices, mslbLBs, mslbNodes, got, d.Seconds(), lbW, ph.ARMTotal.Reads, strings.Join(perLB, ", "))}
	// The services spread as evenly as they can when the fullest and the emptiest load balancer
	// differ by at most one rule; say so only when they do not.
	if len(lbNames) > 1 && maxRules-minRules > 1 {
		res.Notes = append(res.Notes, fmt.Sprintf("Rules per load balancer range from %d to %d, not as even as %d services allow. "+
			"Placement picks the eligible load balancer with the fewest rules, counting the rules on Azure and those of services "+
			"placed on it whose write has not landed yet.", minRules, maxRules, mslbServices))
	}
	writeResult(t, res)
	for _, g := range res.Goals {
		if !g.Met {
			t.Errorf("goal missed: %s: want %s, got %s", g.Name, g.Want, g.Got)
		}
	}
}
