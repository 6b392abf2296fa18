//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate/planner"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestAdminStateBench measures, against azsim with a 1 s latency on every ARM write, the time
// from tainting nodes out-of-service to their backend entries being admin state Down in
// azsim, for one node and for 50 nodes tainted at once, and the ARM writes the 50 cost.
func TestAdminStateBench(t *testing.T) {
	const nodes = 50
	if _, err := os.Stat(filepath.Join(framework.BinDir(), framework.CCMBinaryName)); err != nil {
		t.Skipf("CCM not built: %v", err)
	}
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = nodes
	e := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, CloudConfig: nodeIPConfig()})
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	e.StartCCM()
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), 3*time.Minute)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
	if _, err := e.Kube.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("service ingress", e.ServiceIngress("default", "web"), 3*time.Minute)
	poolID := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/kubernetes",
		e.Azure.SubscriptionID, e.Azure.ResourceGroup)
	states := func(ctx context.Context) (map[string]string, error) {
		doc, err := e.Azsim.Get(ctx, poolID)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		props, _ := doc["properties"].(map[string]any)
		addrs, _ := props["loadBalancerBackendAddresses"].([]any)
		for _, a := range addrs {
			ap, _ := a.(map[string]any)["properties"].(map[string]any)
			ip, _ := ap["ipAddress"].(string)
			st, _ := ap["adminState"].(string)
			out[ip] = st
		}
		return out, nil
	}
	e.WaitFor("every node in the pool", func(ctx context.Context) (bool, error) {
		s, err := states(ctx)
		return err == nil && len(s) == nodes, fmt.Errorf("%d entries (%v)", len(s), err)
	}, 3*time.Minute)

	// Every ARM write now takes 1 s.
	if err := e.Azsim.SetLatency(context.Background(), middleware.LatencyModel{Rules: []middleware.LatencyRule{{Class: middleware.Write, Delay: middleware.Duration(time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	writes := func() int64 {
		st, err := e.Azsim.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st.Writes("backendAddressPools")
	}
	setTaint := func(name string, on bool) {
		for {
			n, err := e.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == planner.TaintOutOfService })
			if on {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: planner.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
			}
			if _, err = e.Kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err == nil {
				return
			}
		}
	}
	// round taints (on) or untaints the machines at once and returns, per node, the time from
	// just before its taint update to its entry showing the new state in azsim.
	round := func(ms []framework.Machine, on bool) (lat []time.Duration, total time.Duration, poolWrites int64) {
		want := map[string]bool{}
		for _, m := range ms {
			want[m.InternalIPs[0]] = true
		}
		if on {
			markShutDown(e, ms)
		}
		before := writes()
		start := time.Now()
		starts := make([]time.Time, len(ms))
		var wg sync.WaitGroup
		for i, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				starts[i] = time.Now()
				setTaint(m.NodeName, on)
			}()
		}
		seen := map[string]time.Time{}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for len(seen) < len(ms) {
			s, err := states(ctx)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			for ip, st := range s {
				if _, done := seen[ip]; !done && want[ip] && (st == "Down") == on {
					seen[ip] = now
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("only %d of %d nodes reached the state", len(seen), len(ms))
			case <-time.After(5 * time.Millisecond):
			}
		}
		wg.Wait()
		for i, m := range ms {
			lat = append(lat, seen[m.InternalIPs[0]].Sub(starts[i]))
		}
		total = time.Since(start)
		// Let the round's last write finish (the LRO) before counting.
		e.WaitFor("writes settled", func(context.Context) (bool, error) {
			w1 := writes()
			return w1 == writes(), nil
		}, time.Minute)
		return lat, total, writes() - before
	}

	var md strings.Builder
	fmt.Fprintf(&md, "# Admin state: taint to Down in azsim (1 s latency on every ARM write)\n\n")
	fmt.Fprintf(&md, "%d nodes, nodeIP pool, one public load balancer (one IPv4 cluster pool).\n\n", nodes)
	fmt.Fprintf(&md, "| scenario | samples | p50 | p99 | max | ARM pool writes |\n|---|---|---|---|---|---|\n")

	b := &bench{t: t, env: e}
	res := newResult("adminstate", "Admin state: taint to Down", "TestAdminStateBench")
	res.Description = fmt.Sprintf("%d nodes behind one LoadBalancer service (`nodeIP` pool); every ARM write takes 1 s in azsim. "+
		"The time from a node's `node.kubernetes.io/out-of-service` taint update to its pool entry showing admin state `Down` "+
		"in azsim (polled every 5 ms), for one node (10 rounds) and for all %d tainted at once (3 rounds), and the pool "+
		"writes those cost. Untainting restores `None` the same way.", nodes, nodes)
	res.Config = map[string]string{"nodes": fmt.Sprint(nodes), "latency": "1 s on every ARM write, reads immediate", "backend pool type": "nodeIP"}
	secs := func(ds []time.Duration) []float64 {
		var out []float64
		for _, d := range ds {
			out = append(out, d.Seconds())
		}
		return out
	}

	var single []time.Duration
	var singleWrites int64
	m1 := b.meter()
	for i := 0; i < 10; i++ {
		m := e.Machines[i%nodes]
		lat, _, w := round([]framework.Machine{m}, true)
		single = append(single, lat...)
		singleWrites += w
		round([]framework.Machine{m}, false)
	}
	p1 := m1.phase("1 node tainted, then untainted (10 rounds)", "ours", 0)
	fmt.Fprintf(&md, "| 1 node tainted (10 rounds) | %d | %s | %s | %s | %.1f per round |\n", len(single), pct(single, 50), pct(single, 99), pct(single, 100), float64(singleWrites)/10)

	var many []time.Duration
	var manyWrites int64
	var allDown []float64
	m2 := b.meter()
	for r := 0; r < 3; r++ {
		lat, total, w := round(e.Machines, true)
		many = append(many, lat...)
		manyWrites += w
		allDown = append(allDown, total.Seconds())
		fmt.Fprintf(&md, "| %d nodes tainted at once, round %d | %d | %s | %s | %s | %d (all Down %s after the first taint) |\n",
			nodes, r+1, len(lat), pct(lat, 50), pct(lat, 99), pct(lat, 100), w, total.Round(time.Millisecond))
		lat, total, w = round(e.Machines, false)
		fmt.Fprintf(&md, "| %d nodes untainted at once, round %d | %d | %s | %s | %s | %d (all None %s) |\n",
			nodes, r+1, len(lat), pct(lat, 50), pct(lat, 99), pct(lat, 100), w, total.Round(time.Millisecond))
	}
	p2 := m2.phase(fmt.Sprintf("%d nodes tainted at once, then untainted (3 rounds)", nodes), "ours", 0)
	fmt.Fprintf(&md, "| %d nodes tainted at once, all rounds | %d | %s | %s | %s | |\n", nodes, len(many), pct(many, 50), pct(many, 99), pct(many, 100))
	t.Log("\n" + md.String())

	p1.Metrics["taint → Down p50 s"] = report.Percentile(secs(single), 50)
	p1.Metrics["taint → Down p99 s"] = report.Percentile(secs(single), 99)
	p1.Metrics["pool writes per taint"] = float64(singleWrites) / 10
	p2.Metrics["taint → Down p50 s"] = report.Percentile(secs(many), 50)
	p2.Metrics["taint → Down p99 s"] = report.Percentile(secs(many), 99)
	p2.Metrics["all Down after first taint, max over rounds s"] = report.Percentile(allDown, 100)
	p2.Metrics["pool writes per 50-node taint"] = float64(manyWrites) / 3
	res.Phases = []report.Phase{p1, p2}
	res.Goals = []report.Goal{
		{Name: fmt.Sprintf("%d nodes: every entry Down (p99 per node)", nodes), Want: "< 2 s", Got: fmt.Sprintf("%.2f s", p2.Metrics["taint → Down p99 s"]),
			Met: p2.Metrics["taint → Down p99 s"] < 2},
		{Name: fmt.Sprintf("pool writes for %d nodes tainted at once", nodes), Want: "1 (one pool)", Got: fmt.Sprintf("%.1f", p2.Metrics["pool writes per 50-node taint"]),
			Met: p2.Metrics["pool writes per 50-node taint"] <= 1},
	}
	res.Headline = []string{fmt.Sprintf("with 1 s ARM writes: 1 node Down in p50 %.2f s / p99 %.2f s; %d nodes at once p50 %.2f s / p99 %.2f s with %.1f pool writes",
		p1.Metrics["taint → Down p50 s"], p1.Metrics["taint → Down p99 s"], nodes, p2.Metrics["taint → Down p50 s"], p2.Metrics["taint → Down p99 s"],
		p2.Metrics["pool writes per 50-node taint"])}
	writeResult(t, res)
	if dir := os.Getenv("AZURE_CCM_BENCH_OUT"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, "adminstate.md"), []byte(md.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[min(i, len(s)-1)].Round(time.Millisecond)
}
