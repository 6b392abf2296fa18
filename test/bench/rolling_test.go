//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate/planner"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

var (
	rollNodes    = envInt("BENCH_ROLL_NODES", 50)
	rollBatch    = envInt("BENCH_ROLL_BATCH", 5)
	rollServices = envInt("BENCH_ROLL_SERVICES", 10)
)

// taintOutOfService adds the out-of-service taint to the machines' nodes at once and returns,
// per node, when its update was sent.
func (b *bench) taintOutOfService(ms []framework.Machine) []time.Time {
	sent := make([]time.Time, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			ctx := context.Background()
			for attempt := 0; ; attempt++ {
				n, err := b.env.Kube.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
				if err != nil {
					b.t.Error(err)
					return
				}
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == planner.TaintOutOfService })
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: planner.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
				sent[i] = time.Now()
				if _, err = b.env.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err == nil {
					return
				} else if attempt > 20 {
					b.t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return sent
}

// TestRollingUpgrade: 50 nodes replaced 5 at a time as a node upgrade does: taint
// out-of-service (the admin-state controller sets their pool entries Down), delete the nodes
// (they leave the pool), register replacements (they join the pool, admin state None). Per
// batch: taint → Down per node, the time for each step, the ARM writes.
func TestRollingUpgrade(t *testing.T) {
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = 2 * rollNodes
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs,
		CloudConfig: nodeIPConfig()})
	b := &bench{t: t, env: env}
	old, repl := env.Machines[:rollNodes], env.Machines[rollNodes:]
	b.createNodes(old)
	env.StartCCM()
	b.waitNodesInitialized(rollNodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	var svcs []*corev1.Service
	for i := range rollServices {
		svcs = append(svcs, service("apps", fmt.Sprintf("svc-%03d", i), int32(1000+i)))
	}
	began := time.Now()
	b.createServices("apps", svcs)
	b.waitIngress("apps", rollServices, began, 10*time.Minute)
	b.waitPool("initial pool", old, nil, nil, time.Now(), 5*time.Minute)

	res := newResult("rolling-upgrade", "Rolling node upgrade with admin state", "TestRollingUpgrade",
		"BENCH_ROLL_NODES", "BENCH_ROLL_BATCH", "BENCH_ROLL_SERVICES")
	res.Description = fmt.Sprintf("%d nodes behind %d LoadBalancer services (`nodeIP` pool) are replaced %d at a time, as a node "+
		"upgrade does: taint `node.kubernetes.io/out-of-service` (the admin-state controller sets the nodes' pool entries "+
		"`Down`, so the load balancer stops sending new connections before the node goes), delete the nodes (their entries "+
		"leave the pool), register %d replacement nodes (they join the pool with admin state None). Latency model of the "+
		"burst: LB PUT 1 s; pool writes go through the backendAddressPools API, 0.3 s like other writes.", rollNodes, rollServices, rollBatch, rollBatch)
	res.Config = map[string]string{"nodes": fmt.Sprint(rollNodes), "batch": fmt.Sprint(rollBatch), "services": fmt.Sprint(rollServices),
		"backend pool type": "nodeIP", "progress": "nodes replaced"}

	var toDown, downSecs, goneSecs, joinSecs []float64
	var curve report.Series
	m := b.meter()
	t0 := time.Now()
	present := append([]framework.Machine(nil), old...)
	oldB, newB := batches(old, rollBatch), batches(repl, rollBatch)
	for i := range oldB {
		ob, nb := oldB[i], newB[i]
		// 1. Drain: taint, wait until every entry of the batch is Down.
		markShutDown(b.env, ob)
		start := time.Now()
		sent := b.taintOutOfService(ob)
		seen := map[string]time.Time{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		for len(seen) < len(ob) {
			addrs, err := b.poolAddresses(ctx, "kubernetes", "kubernetes")
			now := time.Now()
			if err == nil {
				for _, x := range ob {
					if _, ok := seen[x.NodeName]; !ok && addrs[x.InternalIPs[0]] == "Down" {
						seen[x.NodeName] = now
					}
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("batch %d: only %d of %d entries Down (%v)", i+1, len(seen), len(ob), err)
			case <-time.After(20 * time.Millisecond):
			}
		}
		cancel()
		for j, x := range ob {
			toDown = append(toDown, seen[x.NodeName].Sub(sent[j]).Seconds())
		}
		downSecs = append(downSecs, time.Since(start).Seconds())
		// 2. Delete the old nodes: their entries leave the pool.
		start = time.Now()
		b.deleteNodes(ob)
		present = slices.DeleteFunc(present, func(x framework.Machine) bool {
			return slices.ContainsFunc(ob, func(o framework.Machine) bool { return o.NodeName == x.NodeName })
		})
		goneSecs = append(goneSecs, b.waitPool(fmt.Sprintf("batch %d deleted", i+1), present, ob, nil, start, 5*time.Minute).Seconds())
		// 3. Replacements join, admin state None.
		start = time.Now()
		b.createNodes(nb)
		present = append(present, nb...)
		joinSecs = append(joinSecs, b.waitPool(fmt.Sprintf("batch %d replaced", i+1), present, nil,
			func(s string) bool { return s == "" || s == "None" }, start, 5*time.Minute).Seconds())
		curve.X, curve.Y = append(curve.X, time.Since(t0).Seconds()), append(curve.Y, float64((i+1)*len(ob)))
		t.Logf("batch %d: Down after %.1fs, gone %.1fs, replaced %.1fs", i+1, downSecs[i], goneSecs[i], joinSecs[i])
	}
	p := m.phase(fmt.Sprintf("replace %d nodes, %d at a time", rollNodes, rollBatch), "ours", time.Since(t0).Seconds())
	n := float64(len(oldB))
	p.Metrics["taint → Down per node p50 s"] = report.Percentile(toDown, 50)
	p.Metrics["taint → Down per node p99 s"] = report.Percentile(toDown, 99)
	p.Metrics["batch all Down p50 s"] = report.Percentile(downSecs, 50)
	p.Metrics["batch deleted → out of pool p50 s"] = report.Percentile(goneSecs, 50)
	p.Metrics["batch registered → in pool p50 s"] = report.Percentile(joinSecs, 50)
	p.Metrics["LB + pool writes per batch (3 steps)"] = float64(p.Of("loadBalancers").Writes+p.Of("loadBalancers/backendAddressPools").Writes) / n
	curve.Name = "ours"
	p.Series = []report.Series{curve}
	res.Phases = []report.Phase{p}
	wpb := p.Metrics["LB + pool writes per batch (3 steps)"]
	res.Goals = []report.Goal{
		{Name: "taint → Down, p99 per node (one pool write, plus the controller's gathering)", Want: "< 2 s",
			Got: fmt.Sprintf("%.2f s", p.Metrics["taint → Down per node p99 s"]), Met: p.Metrics["taint → Down per node p99 s"] < 2},
		{Name: "LB/pool writes per batch: one per step (Down, leave, join)", Want: "≤ 3", Got: fmt.Sprintf("%.1f", wpb), Met: wpb <= 3},
	}
	res.Headline = []string{fmt.Sprintf("%d nodes replaced %d at a time: taint → Down p50 %.2f s, p99 %.2f s; %.1f LB/pool writes per batch; %.0f s in all",
		rollNodes, rollBatch, p.Metrics["taint → Down per node p50 s"], p.Metrics["taint → Down per node p99 s"], wpb, p.Seconds)}
	writeResult(t, res)
	for _, g := range res.Goals {
		if !g.Met {
			t.Errorf("goal missed: %s: want %s, got %s", g.Name, g.Want, g.Got)
		}
	}
}
