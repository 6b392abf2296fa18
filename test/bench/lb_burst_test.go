//go:build bench

// Package bench holds scale scenarios run by `make bench` (hack/bench.sh), each against a local
// cluster, azsim with an ARM-like latency model, and the CCM binary.
package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// Scenario size; BENCH_NODES / BENCH_SERVICES / BENCH_STEADY_SECONDS override them for quick
// local runs (the report says which values ran). Every variant of the burst creates the same
// number of services, so that totals compare.
var (
	benchNodes    = envInt("BENCH_NODES", 200)
	benchServices = envInt("BENCH_SERVICES", 300)
	// The steady-state phase lasts 10 real minutes with --node-sync-period=5s: 120 node syncs,
	// as many as 200 minutes at the default period of 100s.
	benchSteady = time.Duration(envInt("BENCH_STEADY_SECONDS", 600)) * time.Second
)

const steadyNodeSyncPeriod = "5s"

// issueLatency is the burst's latency model: LB PUT 1 s, PIP PUT 0.5 s, NSG PUT 0.5 s,
// GET 50 ms (other writes and deletes 300 ms, as azsim's realistic model).
func issueLatency() client.LatencyModel {
	d := func(x time.Duration) middleware.Duration { return middleware.Duration(x) }
	return client.LatencyModel{Rules: []client.LatencyRule{
		{Class: middleware.Write, ResourceType: "Microsoft.Network/loadBalancers", Delay: d(time.Second)},
		{Class: middleware.Write, ResourceType: "Microsoft.Network/publicIPAddresses", Delay: d(500 * time.Millisecond)},
		{Class: middleware.Write, ResourceType: "Microsoft.Network/networkSecurityGroups", Delay: d(500 * time.Millisecond)},
		{Class: middleware.Write, Delay: d(300 * time.Millisecond)},
		{Class: middleware.Delete, Delay: d(300 * time.Millisecond)},
		{Class: middleware.Read, Delay: d(50 * time.Millisecond)},
	}}
}

type bench struct {
	t   *testing.T
	env *framework.Env
}

func (b *bench) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.t.Cleanup(cancel)
	return ctx
}

func (b *bench) resetStats() {
	if err := b.env.Azsim.ResetStats(b.ctx()); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bench) stats() client.Stats {
	s, err := b.env.Azsim.Stats(b.ctx())
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func service(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// createServices creates the services at once (16 clients in parallel) in namespace ns,
// creating the namespace first.
func (b *bench) createServices(ns string, svcs []*corev1.Service) {
	ctx := b.ctx()
	kube := b.env.Kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	work := make(chan *corev1.Service)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for svc := range work {
				if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					b.t.Errorf("create %s: %v", svc.Name, err)
				}
			}
		})
	}
	for _, s := range svcs {
		work <- s
	}
	close(work)
	wg.Wait()
}

// waitIngress waits until n services of ns have an ingress IP and returns the time since
// began and the progress curve (seconds, services with an IP).
func (b *bench) waitIngress(ns string, n int, began time.Time, timeout time.Duration) (time.Duration, report.Series) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var curve report.Series
	last := -1
	for {
		// The list has its own deadline so that a timeout still reports how far it got.
		lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
		list, err := b.env.Kube.CoreV1().Services(ns).List(lctx, metav1.ListOptions{ResourceVersion: "0"})
		lcancel()
		if err != nil {
			b.t.Fatal(err)
		}
		done := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 && s.Status.LoadBalancer.Ingress[0].IP != "" {
				done++
			}
		}
		el := time.Since(began)
		if done != last {
			curve.X, curve.Y = append(curve.X, el.Seconds()), append(curve.Y, float64(done))
			if done%25 == 0 || done == n {
				b.t.Logf("%s: %d/%d services have an IP after %s", ns, done, n, el.Round(time.Second))
			}
		}
		last = done
		if done >= n {
			return el, curve
		}
		if ctx.Err() != nil {
			// Not fatal: the caller records what converged (the result says it timed out).
			b.t.Errorf("%s: only %d/%d services got an IP within %s", ns, done, n, timeout)
			return el, curve
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// burst creates n services at once in namespace ns and returns the time until every one has
// an ingress IP, and the progress curve.
func (b *bench) burst(ns string, n int) (time.Duration, report.Series) {
	var svcs []*corev1.Service
	for i := range n {
		// Distinct ports: the shape of a real burst (one port per app).
		svcs = append(svcs, service(ns, fmt.Sprintf("svc-%03d", i), int32(1000+i)))
	}
	began := time.Now()
	b.createServices(ns, svcs)
	return b.waitIngress(ns, n, began, 45*time.Minute)
}

// deleteAll deletes the namespace's services and waits until azsim holds no public IP and no
// load balancer.
func (b *bench) deleteAll(ns string) {
	ctx := b.ctx()
	kube := b.env.Kube
	list, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, s := range list.Items {
		if err := kube.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			b.t.Fatal(err)
		}
	}
	began := time.Now()
	b.env.WaitFor("every service of "+ns+" cleaned from azsim", func(ctx context.Context) (bool, error) {
		pips, err := b.env.Azsim.List(ctx, "Microsoft.Network/publicIPAddresses")
		if err != nil {
			return false, err
		}
		lbs, err := b.env.Azsim.List(ctx, "Microsoft.Network/loadBalancers")
		if err != nil {
			return false, err
		}
		return len(pips) == 0 && len(lbs) == 0, fmt.Errorf("%d public IPs and %d LBs left", len(pips), len(lbs))
	}, 20*time.Minute)
	b.t.Logf("%s: cleaned up in %s", ns, time.Since(began).Round(time.Second))
}

// burstVariant is one configuration of the CCM the burst runs against.
type burstVariant struct {
	name  string   // variant in the result
	flags []string // CCM flags on top of the defaults
	what  string   // how the report describes it
}

// burstVariants separate the two causes of the speed-up: the service workers (concurrency)
// and the group-commit writers (merging). All three are this CCM; none is the existing
// provider.
var burstVariants = []burstVariant{
	{"ours", nil, "the CCM as shipped: 500 service workers, one group-commit writer per Azure resource (100 ms gathering window)"},
	{"50 workers, no merging", []string{"--concurrent-service-syncs=50", "--disable-lb-write-merging"},
		"50 service workers, every service its own read-modify-write of each resource (`--concurrent-service-syncs=50 --disable-lb-write-merging`)"},
	{"1 worker, no merging", []string{"--concurrent-service-syncs=1", "--disable-lb-write-merging"},
		"one service at a time, every service its own read-modify-write (`--concurrent-service-syncs=1 --disable-lb-write-merging`); " +
			"it approximates one-at-a-time reconciliation with this CCM's code, it is not the existing provider"},
}

// TestLoadBalancerBurst: 200 nodes, 300 LoadBalancer services at once; time to the last IP and
// the ARM calls per resource type for three variants of this CCM of equal size (each on a
// fresh cluster and azsim of the same shape); and after the first, a steady state of 10
// minutes of frequent syncs that must write nothing (its own result, steady-state.json).
func TestLoadBalancerBurst(t *testing.T) {
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = benchNodes
	startEnv := func(flags ...string) *bench {
		env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs,
			CloudConfig: nodeIPConfig()})
		b := &bench{t: t, env: env}
		b.createNodes(env.Machines)
		// Node-sync every 5s for the steady state; it costs nothing while nodes do not change.
		env.StartCCM(append([]string{"--node-sync-period=" + steadyNodeSyncPeriod}, flags...)...)
		b.waitNodesInitialized(benchNodes, 10*time.Minute)
		if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
			t.Fatal(err)
		}
		return b
	}
	sizeKeys := []string{"BENCH_NODES", "BENCH_SERVICES"}
	res := newResult("lb-burst", "Burst of LoadBalancer services", "TestLoadBalancerBurst", sizeKeys...)
	var variantText []string
	for _, v := range burstVariants {
		variantText = append(variantText, fmt.Sprintf("**%s**: %s", v.name, v.what))
	}
	res.Description = fmt.Sprintf("%d LoadBalancer services (one TCP port each) created at once on %d KWOK nodes of one scale set "+
		"(`nodeIP` backend pool), azsim latency LB PUT 1 s, PIP PUT 0.5 s, NSG PUT 0.5 s, other writes and deletes 0.3 s, GET 50 ms. "+
		"Time from the first create to the last service with `status.loadBalancer.ingress`. Three variants of this CCM, each "+
		"creating the same %d services on a fresh cluster and azsim of the same shape, one after the other in the same run: %s. "+
		"The second variant separates what the workers (concurrency) and the writers (merging) each contribute.",
		benchServices, benchNodes, benchServices, strings.Join(variantText, "; "))
	res.Config = map[string]string{"nodes": fmt.Sprint(benchNodes), "services (every variant)": fmt.Sprint(benchServices),
		"backend pool type": "nodeIP", "latency": "LB PUT 1s, PIP PUT 0.5s, NSG PUT 0.5s, other writes 0.3s, deletes 0.3s, GET 50ms", "progress": "services with an IP"}

	var phases []report.Phase
	for i, v := range burstVariants {
		b := startEnv(v.flags...)
		m := b.meter()
		d, curve := b.burst("burst", benchServices)
		p := m.phase("burst", v.name, d.Seconds())
		curve.Name = v.name
		p.Series = []report.Series{curve}
		p.Metrics["seconds per service"] = p.Seconds / float64(benchServices)
		phases = append(phases, p)
		if i == 0 {
			b.steadyState(sizeKeys)
		}
		res.Phases = phases
		if i < len(burstVariants)-1 {
			res.Notes = []string{fmt.Sprintf("Only %d of %d variants had run when this result was written (the run stopped before).", i+1, len(burstVariants))}
			writeResult(t, res)
		}
		// Free the machine for the next variant: its cluster and azsim are no longer needed.
		b.env.Close()
	}
	res.Notes = nil

	ours, noMerge, serial := phases[0], phases[1], phases[2]
	lbW, nsgW, pipW := ours.Of("loadBalancers").Writes, ours.Of("networkSecurityGroups").Writes, ours.Of("publicIPAddresses").Writes
	speedup := ratio(serial.Seconds, ours.Seconds)
	fromWorkers := ratio(serial.Seconds, noMerge.Seconds)
	fromMerging := ratio(noMerge.Seconds, ours.Seconds)
	res.Goals = []report.Goal{
		{Name: "load balancer writes for the burst", Want: "≤ 20", Got: fmt.Sprint(lbW), Met: lbW <= 20},
		{Name: "NSG writes for the burst", Want: "≤ 20", Got: fmt.Sprint(nsgW), Met: nsgW <= 20},
		{Name: "faster than one at a time (same number of services)", Want: "≥ 10×", Got: fmt.Sprintf("%.1f×", speedup), Met: speedup >= 10},
	}
	res.Headline = []string{fmt.Sprintf("%d services on %d nodes, every variant: %.0f s ours, %.0f s with 50 workers and no merging, "+
		"%.0f s with 1 worker and no merging — workers alone %.1f× faster, merging a further %.1f× (%.1f× in all); "+
		"LB writes %d / %d / %d, NSG writes %d / %d / %d",
		benchServices, benchNodes, ours.Seconds, noMerge.Seconds, serial.Seconds, fromWorkers, fromMerging, speedup,
		lbW, noMerge.Of("loadBalancers").Writes, serial.Of("loadBalancers").Writes,
		nsgW, noMerge.Of("networkSecurityGroups").Writes, serial.Of("networkSecurityGroups").Writes)}
	res.Notes = []string{fmt.Sprintf("Public IP writes are one per service in every variant (%d ours): every service owns its public IP, "+
		"a separate ARM resource.", pipW)}
	writeResult(t, res)

	for _, g := range res.Goals {
		if !g.Met {
			t.Errorf("goal missed: %s: want %s, got %s", g.Name, g.Want, g.Got)
		}
	}
}

// steadyState restarts the CCM after the burst (its first sync re-ensures every service), then
// lets node syncs run; nothing changes, so nothing may be written. It writes steady-state.json.
func (b *bench) steadyState(sizeKeys []string) {
	t, env := b.t, b.env
	m := b.meter()
	env.RestartCCM()
	began := time.Now()
	deadline := time.After(benchSteady)
	for waiting := true; waiting; {
		select {
		case <-deadline:
			waiting = false
		case <-env.CCM().Done():
			t.Fatalf("the CCM exited during the steady state; see %s", env.CCMLogPath())
		}
	}
	steady := m.phase(fmt.Sprintf("restart + %s of resyncs", benchSteady), "ours", time.Since(began).Seconds())
	st := newResult("steady-state", "Steady state", "TestLoadBalancerBurst", append(sizeKeys, "BENCH_STEADY_SECONDS")...)
	st.Description = fmt.Sprintf("After the burst (%d services on %d nodes), the CCM is restarted — its first sync re-ensures every "+
		"service — and then runs for %s with `--node-sync-period=%s` (every service's load balancer re-checked against the nodes "+
		"%d times). Nothing changes in the cluster, so nothing may be written to ARM. Same latency model as the burst.",
		benchServices, benchNodes, benchSteady, steadyNodeSyncPeriod, int(benchSteady/(5*time.Second)))
	st.Config = map[string]string{"nodes": fmt.Sprint(benchNodes), "services": fmt.Sprint(benchServices),
		"duration": benchSteady.String(), "--node-sync-period": steadyNodeSyncPeriod}
	steady.Metrics["ARM reads per minute"] = float64(steady.ARMTotal.Reads) / (steady.Seconds / 60)
	st.Phases = []report.Phase{steady}
	w := steady.ARMTotal.Writes + steady.ARMTotal.Deletes
	st.Goals = []report.Goal{{Name: "ARM writes and deletes in steady state", Want: "0", Got: fmt.Sprint(w), Met: w == 0}}
	st.Headline = []string{fmt.Sprintf("%s of resyncs with %d services: %d ARM writes, %d reads (%.1f per minute, restart included)",
		benchSteady, benchServices, w, steady.ARMTotal.Reads, steady.Metrics["ARM reads per minute"])}
	writeResult(t, st)
	if w != 0 {
		t.Errorf("goal missed: ARM writes and deletes in steady state: want 0, got %d", w)
	}
}
