//go:build bench

package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

var (
	throttleNodes    = envInt("BENCH_THROTTLE_NODES", 200)
	throttleServices = envInt("BENCH_THROTTLE_SERVICES", 300)
)

// TestThrottling: the burst of 300 services on 200 nodes, first without throttling, then
// with azsim's ARM throttling model at Azure's current per-subscription limits (token buckets:
// reads 250 refilled at 25/s, writes and deletes 200 at 10/s). The burst needs more writes than
// the write bucket holds; the CCM's throttle gate reads the x-ms-ratelimit-remaining headers
// and Retry-After and holds calls back, so only a handful of 429s may be received.
func TestThrottling(t *testing.T) {
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = throttleNodes
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs,
		CloudConfig: nodeIPConfig()})
	b := &bench{t: t, env: env}
	b.createNodes(env.Machines)
	env.StartCCM()
	b.waitNodesInitialized(throttleNodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	limits := middleware.DefaultThrottle()
	res := newResult("throttling", "ARM throttling at Azure's limits", "TestThrottling", "BENCH_THROTTLE_NODES", "BENCH_THROTTLE_SERVICES")
	res.Description = fmt.Sprintf("The burst of %d services on %d nodes with azsim's "+
		"ARM throttling model on at Azure's current per-subscription token buckets (reads %.0f refilled at %.0f/s, writes %.0f "+
		"at %.0f/s, deletes %.0f at %.0f/s; 429 with Retry-After and `x-ms-ratelimit-remaining-subscription-*` headers on every "+
		"answer). The burst needs more writes than the write bucket holds (a public IP per service). The buckets start full "+
		"when throttling is switched on, before the burst. Then, without latency model, every service is deleted and the "+
		"burst repeated.",
		throttleServices, throttleNodes, limits.Reads.Capacity, limits.Reads.RefillPerSecond, limits.Writes.Capacity,
		limits.Writes.RefillPerSecond, limits.Deletes.Capacity, limits.Deletes.RefillPerSecond)
	res.Config = map[string]string{"nodes": fmt.Sprint(throttleNodes), "services": fmt.Sprint(throttleServices),
		"throttling": fmt.Sprintf("reads %v+%v/s, writes %v+%v/s, deletes %v+%v/s", limits.Reads.Capacity, limits.Reads.RefillPerSecond,
			limits.Writes.Capacity, limits.Writes.RefillPerSecond, limits.Deletes.Capacity, limits.Deletes.RefillPerSecond),
		"progress": "services with an IP"}

	// Throttling on from the start of the burst; the buckets start full.
	limits.Enabled = true
	if err := env.Azsim.SetThrottle(b.ctx(), limits); err != nil {
		t.Fatal(err)
	}
	m := b.meter()
	d, curve := b.burst("throttled", throttleServices)
	thr := m.phase("burst, latency model", "throttled", d.Seconds())
	curve.Name = "latency model"
	thr.Series = []report.Series{curve}

	// The CCM at full speed: no modelled latency, so its request rate is limited by nothing but
	// itself and the throttle gate. Deleting every service, then the burst again.
	if err := env.Azsim.SetLatency(b.ctx(), middleware.LatencyModel{}); err != nil {
		t.Fatal(err)
	}
	m = b.meter()
	t0 := time.Now()
	b.deleteAll("throttled")
	del := m.phase("delete all, no latency", "throttled", time.Since(t0).Seconds())
	m = b.meter()
	d, curve = b.burst("fast", throttleServices)
	fast := m.phase("burst, no latency", "throttled", d.Seconds())
	curve.Name = "no latency"
	fast.Series = []report.Series{curve}

	res.Phases = []report.Phase{thr, del, fast}
	var total429 int64
	var gate float64
	for _, p := range res.Phases {
		total429 += p.Throttled429
		gate += p.ThrottledSeconds
	}
	res.Goals = []report.Goal{
		{Name: "429s received in the three throttled phases", Want: "a handful (≤ 10)", Got: fmt.Sprint(total429), Met: total429 <= 10},
	}
	res.Headline = []string{fmt.Sprintf("%d services created, deleted and created again at Azure's token-bucket limits: %d 429s received in all; the burst converged in %.0f s with the latency model and %.0f s without; %.0f s spent waiting at the CCM's throttle gate",
		throttleServices, total429, thr.Seconds, fast.Seconds, gate)}
	res.Notes = []string{"With the latency model the CCM writes more slowly than the write bucket refills (10/s), so the bucket is " +
		"hardly touched (compare the unthrottled burst of the same size in the first scenario); the no-latency phases are the " +
		"stress test: azsim answers at once and only the throttle gate and the CCM's own pace limit the request rate."}
	writeResult(t, res)
	if total429 > 10 {
		t.Errorf("goal missed: %d 429s", total429)
	}
}

var (
	gateNodes    = envInt("BENCH_GATE_NODES", 20)
	gateServices = envInt("BENCH_GATE_SERVICES", 100)
	gateDivisor  = envInt("BENCH_GATE_DIVISOR", 10)
)

// TestThrottlingScaledLimits exercises the CCM's throttle gate, which Azure's real limits do not
// reach at the CCM's pace: the same token buckets divided by 10 (writes 20 refilled at 1/s),
// a burst of 100 services without latency model. It counts the 429s received and the time
// spent waiting at the gate.
func TestThrottlingScaledLimits(t *testing.T) {
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = gateNodes
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs,
		CloudConfig: nodeIPConfig()})
	b := &bench{t: t, env: env}
	b.createNodes(env.Machines)
	env.StartCCM()
	b.waitNodesInitialized(gateNodes, 10*time.Minute)
	limits := middleware.DefaultThrottle()
	f := float64(gateDivisor)
	for _, bk := range []*middleware.Bucket{&limits.Reads, &limits.Writes, &limits.Deletes} {
		bk.Capacity, bk.RefillPerSecond = bk.Capacity/f, bk.RefillPerSecond/f
	}
	limits.Enabled = true
	if err := env.Azsim.SetThrottle(b.ctx(), limits); err != nil {
		t.Fatal(err)
	}
	res := newResult("throttling-gate", "Throttle gate at a tenth of Azure's limits", "TestThrottlingScaledLimits",
		"BENCH_GATE_NODES", "BENCH_GATE_SERVICES", "BENCH_GATE_DIVISOR")
	res.Description = fmt.Sprintf("Azure's limits are never approached at the CCM's pace (previous scenario), so this one divides "+
		"the token buckets by %d (reads %v refilled at %v/s, writes %v at %v/s, deletes %v at %v/s) and creates %d services on "+
		"%d nodes at once with no latency model: the burst needs several times the write bucket. The CCM's throttle gate "+
		"must hold calls back from the `x-ms-ratelimit-remaining-*` headers and `Retry-After`, so few 429s are received.",
		gateDivisor, limits.Reads.Capacity, limits.Reads.RefillPerSecond, limits.Writes.Capacity, limits.Writes.RefillPerSecond,
		limits.Deletes.Capacity, limits.Deletes.RefillPerSecond, gateServices, gateNodes)
	res.Config = map[string]string{"nodes": fmt.Sprint(gateNodes), "services": fmt.Sprint(gateServices),
		"throttling": fmt.Sprintf("Azure's buckets / %d", gateDivisor), "progress": "services with an IP"}
	m := b.meter()
	d, curve := b.burst("gate", gateServices)
	p := m.phase("burst, no latency", "throttled at 1/10", d.Seconds())
	curve.Name = "throttled at a tenth of Azure's limits"
	p.Series = []report.Series{curve}
	res.Phases = []report.Phase{p}
	res.Goals = []report.Goal{{Name: "429s received", Want: "a handful (≤ 10)", Got: fmt.Sprint(p.Throttled429), Met: p.Throttled429 <= 10}}
	res.Headline = []string{fmt.Sprintf("%d services with write bucket %v + %v/s: %d 429s received, %d ARM writes, converged in %.0f s, %.0f s waited at the throttle gate",
		gateServices, limits.Writes.Capacity, limits.Writes.RefillPerSecond, p.Throttled429, p.ARMTotal.Writes, p.Seconds, p.ThrottledSeconds)}
	writeResult(t, res)
	if p.Throttled429 > 10 {
		t.Errorf("goal missed: %d 429s", p.Throttled429)
	}
}
