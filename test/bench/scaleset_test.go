//go:build bench

package bench

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

var (
	scaleNodes    = envInt("BENCH_SCALE_NODES", 100)
	scaleBatch    = envInt("BENCH_SCALE_BATCH", 20)
	scaleBatches  = envInt("BENCH_SCALE_BATCHES", 5)
	scaleServices = envInt("BENCH_SCALE_SERVICES", 20)
)

// TestScaleSetScaling: a scale set of 100 nodes with 20 LoadBalancer services grows by 5
// batches of 20 nodes and shrinks back by the same batches; per batch, the time until the
// load balancer's pool matches the nodes and the ARM writes it cost. Ours, then one worker
// without write merging, in the same run.
func TestScaleSetScaling(t *testing.T) {
	extra := scaleBatch * scaleBatches
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = scaleNodes + extra
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs,
		CloudConfig: nodeIPConfig()})
	b := &bench{t: t, env: env}
	base, spare := env.Machines[:scaleNodes], env.Machines[scaleNodes:]
	b.createNodes(base)
	env.StartCCM()
	b.waitNodesInitialized(scaleNodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	var svcs []*corev1.Service
	for i := range scaleServices {
		svcs = append(svcs, service("apps", fmt.Sprintf("svc-%03d", i), int32(1000+i)))
	}
	began := time.Now()
	b.createServices("apps", svcs)
	b.waitIngress("apps", scaleServices, began, 10*time.Minute)
	b.waitPool("initial pool", base, nil, nil, time.Now(), 5*time.Minute)

	res := newResult("scale-set-scaling", "Scale set scale-out and scale-in", "TestScaleSetScaling",
		"BENCH_SCALE_NODES", "BENCH_SCALE_BATCH", "BENCH_SCALE_BATCHES", "BENCH_SCALE_SERVICES")
	res.Description = fmt.Sprintf("A scale set of %d KWOK nodes behind %d LoadBalancer services (`nodeIP` pool) grows by %d batches "+
		"of %d nodes (each batch registered at once, then the next once the pool has it) and shrinks back by the same batches "+
		"(nodes deleted). Per batch: time from the node changes until the load balancer's backend pool lists exactly the "+
		"nodes, and the ARM writes. Latency model of the burst. **ours** (the CCM as shipped) vs **1 worker, no merging** "+
		"(the same CCM with `--concurrent-service-syncs=1 --disable-lb-write-merging`: one service at a time, every service its own "+
		"read-modify-write; this CCM's code, not the existing provider) in the same run.", scaleNodes, scaleServices, scaleBatches, scaleBatch)
	res.Config = map[string]string{"initial nodes": fmt.Sprint(scaleNodes), "batch": fmt.Sprint(scaleBatch),
		"batches": fmt.Sprint(scaleBatches), "services": fmt.Sprint(scaleServices), "backend pool type": "nodeIP",
		"progress": "nodes in the backend pool"}

	run := func(variant string) (out, in report.Phase) {
		var curveOut, curveIn report.Series
		var secsOut, secsIn []float64
		m := b.meter()
		t0 := time.Now()
		present := append([]framework.Machine(nil), base...)
		for i, batch := range batches(spare, scaleBatch) {
			start := time.Now()
			b.createNodes(batch)
			present = append(present, batch...)
			d := b.waitPool(variant+" scale-out "+describeBatch(i, batch), present, nil, nil, start, 10*time.Minute)
			secsOut = append(secsOut, d.Seconds())
			curveOut.X, curveOut.Y = append(curveOut.X, time.Since(t0).Seconds()), append(curveOut.Y, float64(len(present)))
			t.Logf("%s: scale-out batch %d in the pool after %s", variant, i+1, d.Round(time.Millisecond))
		}
		out = m.phase(fmt.Sprintf("scale-out %d×%d", scaleBatches, scaleBatch), variant, time.Since(t0).Seconds())
		m = b.meter()
		t0 = time.Now()
		for i, batch := range batches(spare, scaleBatch) {
			start := time.Now()
			b.deleteNodes(batch)
			present = present[:len(present)-len(batch)]
			d := b.waitPool(variant+" scale-in "+describeBatch(i, batch), nil, batch, nil, start, 10*time.Minute)
			secsIn = append(secsIn, d.Seconds())
			curveIn.X, curveIn.Y = append(curveIn.X, time.Since(t0).Seconds()), append(curveIn.Y, float64(len(present)))
			t.Logf("%s: scale-in batch %d out of the pool after %s", variant, i+1, d.Round(time.Millisecond))
		}
		in = m.phase(fmt.Sprintf("scale-in %d×%d", scaleBatches, scaleBatch), variant, time.Since(t0).Seconds())
		for _, x := range []struct {
			p    *report.Phase
			secs []float64
			c    report.Series
			dir  string
		}{{&out, secsOut, curveOut, "scale-out"}, {&in, secsIn, curveIn, "scale-in"}} {
			n := float64(len(x.secs))
			x.p.Metrics["batch seconds p50"] = report.Percentile(x.secs, 50)
			x.p.Metrics["batch seconds max"] = report.Percentile(x.secs, 100)
			x.p.Metrics["LB + pool writes per batch"] = float64(x.p.Of("loadBalancers").Writes+x.p.Of("loadBalancers/backendAddressPools").Writes) / n
			x.p.Metrics["all ARM writes per batch"] = float64(x.p.ARMTotal.Writes) / n
			x.c.Name = x.dir + " (" + variant + ")"
			x.p.Series = []report.Series{x.c}
		}
		return out, in
	}
	oursOut, oursIn := run("ours")

	if err := env.StopCCM(); err != nil {
		t.Fatal(err)
	}
	env.StartCCM("--concurrent-service-syncs=1", "--disable-lb-write-merging")
	b.waitNodesInitialized(scaleNodes, 5*time.Minute)
	b.waitIngress("apps", scaleServices, time.Now(), 5*time.Minute)
	baseOut, baseIn := run("1 worker, no merging")

	res.Phases = []report.Phase{oursOut, oursIn, baseOut, baseIn}
	wpb := func(p report.Phase) float64 { return p.Metrics["LB + pool writes per batch"] }
	res.Headline = []string{fmt.Sprintf("batches of %d nodes joining %d services' load balancer: %.1f LB/pool writes and %.1f s per batch ours, %.1f writes and %.1f s with 1 worker and no merging; leaving: %.1f writes and %.1f s ours, %.1f and %.1f s with 1 worker and no merging",
		scaleBatch, scaleServices, wpb(oursOut), oursOut.Metrics["batch seconds p50"], wpb(baseOut), baseOut.Metrics["batch seconds p50"],
		wpb(oursIn), oursIn.Metrics["batch seconds p50"], wpb(baseIn), baseIn.Metrics["batch seconds p50"])}
	res.Goals = []report.Goal{
		{Name: "LB/pool writes per scale-out batch (one PUT per changed resource per batch)", Want: "≤ 2",
			Got: fmt.Sprintf("%.1f", wpb(oursOut)), Met: wpb(oursOut) <= 2},
		{Name: "LB/pool writes per scale-in batch", Want: "≤ 2", Got: fmt.Sprintf("%.1f", wpb(oursIn)), Met: wpb(oursIn) <= 2},
	}
	writeResult(t, res)
	for _, g := range res.Goals {
		if !g.Met {
			t.Errorf("goal missed: %s: want %s, got %s", g.Name, g.Want, g.Got)
		}
	}
}
