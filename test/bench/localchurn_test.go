//go:build bench

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azure-ccm/azure-ccm/test/bench/report"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// Local services with pod churn; BENCH_LOCAL_* shrink or lengthen it.
var (
	localServices = envInt("BENCH_LOCAL_SERVICES", 50)
	localNodes    = envInt("BENCH_LOCAL_NODES", 100)
	localChurn    = time.Duration(envInt("BENCH_LOCAL_CHURN_SECONDS", 180)) * time.Second
	localInterval = envInt("BENCH_LOCAL_INTERVAL", 5)
	localOps      = envInt("BENCH_LOCAL_OPS_PER_SECOND", 2)
	localSeed     = envInt("BENCH_LOCAL_SEED", 1)
)

const (
	localNS          = "local"
	localMaxReplicas = 4
	// localPoll is how often the lag watcher compares EndpointSlices with azsim's pools; the
	// measured lag is late by up to this much (plus the time of one poll).
	localPoll = 250 * time.Millisecond
)

// TestLocalChurn: externalTrafficPolicy: Local services on a multiple-standard-load-balancer
// configuration (one entry) with nodeIP pools, so every service has a dedicated pool of the
// nodes running its ready pods. Deployments are scaled and pods deleted at random (seeded)
// while a watcher measures the lag from an EndpointSlice change to the pool in azsim holding
// exactly the new nodes; at the end every pool must equal the nodes of its service's ready pods.
func TestLocalChurn(t *testing.T) {
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = localNodes
	env := framework.Start(t, framework.Options{CCMBinary: ccmBinary(), Topology: topo, StartupTimeout: 5 * time.Minute, ClusterExtraArgs: clusterArgs,
		CloudConfig: map[string]any{
			"loadBalancerBackendPoolConfigurationType":       "nodeIP",
			"loadBalancerBackendPoolUpdateIntervalInSeconds": localInterval,
			"multipleStandardLoadBalancerConfigurations":     []map[string]any{{"name": "kubernetes", "primaryVMSet": "pool0"}},
		}})
	b := &bench{t: t, env: env}
	lc := &localChurnRun{b: b, nodeIP: map[string]string{}}
	for _, mc := range env.Machines {
		lc.nodeIP[mc.NodeName] = mc.InternalIPs[0]
	}
	lc.createNodes()
	env.StartCCM()
	b.waitNodesInitialized(localNodes, 10*time.Minute)
	if err := env.Azsim.SetLatency(b.ctx(), issueLatency()); err != nil {
		t.Fatal(err)
	}
	res := newResult("local-churn", "Local services with pod churn", "TestLocalChurn",
		"BENCH_LOCAL_SERVICES", "BENCH_LOCAL_NODES", "BENCH_LOCAL_CHURN_SECONDS", "BENCH_LOCAL_INTERVAL", "BENCH_LOCAL_OPS_PER_SECOND", "BENCH_LOCAL_SEED")
	res.Description = fmt.Sprintf("%d `externalTrafficPolicy: Local` LoadBalancer services on %d KWOK nodes, each backed by a "+
		"Deployment of 1-3 pods (kube-controller-manager's EndpointSlice controller publishes the endpoints), with "+
		"`multipleStandardLoadBalancerConfigurations` of one entry and `nodeIP` pools, so every service has a dedicated "+
		"backend pool of the nodes running its ready pods, updated every `loadBalancerBackendPoolUpdateIntervalInSeconds` = %d s. "+
		"After the services have their IPs and pools, %s of churn: %d random operations per second (seed %d), each either "+
		"scaling a random Deployment to 0-%d replicas or deleting one of its pods. A watcher polls the EndpointSlices and "+
		"azsim's pools every %s and measures, for every change of a service's ready nodes, the time until its pool holds "+
		"exactly them (changes overtaken by the next one before the pool caught up are counted apart). Latency model of the "+
		"burst (LB PUT 1 s, other writes 0.3 s, GET 50 ms). The run ends with an exact check: every service's pool equals the "+
		"nodes of its ready pods.",
		localServices, localNodes, localInterval, localChurn, localOps, localSeed, localMaxReplicas, localPoll)
	res.Config = map[string]string{"nodes": fmt.Sprint(localNodes), "services": fmt.Sprint(localServices),
		"pool update interval": fmt.Sprintf("%d s", localInterval), "churn": fmt.Sprintf("%s, %d ops/s, seed %d", localChurn, localOps, localSeed),
		"backend pool type": "nodeIP", "load balancer configurations": "1 (kubernetes)",
		"latency":  "LB PUT 1s, PIP PUT 0.5s, NSG PUT 0.5s, other writes 0.3s, deletes 0.3s, GET 50ms",
		"progress": "lag of a change (s), by when it happened"}

	rng := rand.New(rand.NewPCG(uint64(localSeed), 0x10ca1))
	replicas := make([]int32, localServices)
	for i := range replicas {
		replicas[i] = 1 + rng.Int32N(3)
	}
	m := b.meter()
	began := time.Now()
	lc.createApps(replicas)
	d, _ := b.waitIngress(localNS, localServices, began, 30*time.Minute)
	conv := lc.waitPoolsMatch("initial pools", 15*time.Minute)
	setup := m.phase(fmt.Sprintf("create %d Local services", localServices), "ours", time.Since(began).Seconds())
	setup.Metrics["seconds from the last IP to every pool"] = conv.Seconds()
	setup.Metrics["seconds to the last IP"] = d.Seconds()

	m = b.meter()
	w := lc.watch()
	churnStart := time.Now()
	ops := lc.churn(rng, replicas)
	churnEnd := time.Now()
	settle := lc.waitPoolsMatch("pools after the churn", 15*time.Minute)
	lags, superseded := w.stop()
	ph := m.phase(fmt.Sprintf("%s of churn", localChurn), "ours", time.Since(churnStart).Seconds())
	exact := lc.exactCheck()

	sort.Float64s(lags)
	// Local pools are written inline in load balancer PUTs; the cluster pool with the pool API.
	poolWrites := ph.Of("loadBalancers").Writes + ph.Of("loadBalancers/backendAddressPools").Writes
	windows := churnEnd.Sub(churnStart).Seconds() / float64(localInterval)
	ph.Metrics["operations"] = float64(ops)
	ph.Metrics["pool changes measured"] = float64(len(lags))
	ph.Metrics["pool changes overtaken"] = float64(superseded)
	ph.Metrics["lag p50 s"] = percentile(lags, 0.5)
	ph.Metrics["lag p99 s"] = percentile(lags, 0.99)
	ph.Metrics["lag max s"] = percentile(lags, 1)
	ph.Metrics["load balancer and pool writes per flush window"] = float64(poolWrites) / windows
	ph.Metrics["seconds to converge after the churn"] = settle.Seconds()
	ph.Series = []report.Series{w.series}
	res.Phases = []report.Phase{setup, ph}
	p99 := percentile(lags, 0.99)
	res.Goals = []report.Goal{
		{Name: "every Local pool equals the nodes of its ready pods at the end", Want: "all services", Got: fmt.Sprintf("%d of %d", localServices-len(exact), localServices), Met: len(exact) == 0},
		{Name: "EndpointSlice change → pool, p99", Want: fmt.Sprintf("≤ 2 × the update interval (%d s)", 2*localInterval), Got: fmt.Sprintf("%.1f s", p99), Met: p99 <= float64(2*localInterval)},
	}
	res.Headline = []string{fmt.Sprintf("%d Local services on %d nodes under %s of pod churn (%d operations): EndpointSlice change to Azure pool p50 %.1f s, p99 %.1f s with a %d s update interval; %.1f load balancer and pool writes per flush window; pools exact at the end: %v",
		localServices, localNodes, localChurn, ops, percentile(lags, 0.5), p99, localInterval, float64(poolWrites)/windows, len(exact) == 0)}
	res.Notes = []string{fmt.Sprintf("The lag includes the watcher's polling (every %s) and, for a scale-up, nothing of the pod start: "+
		"it starts when the EndpointSlice shows the pod ready. A flush writes only the pools whose members changed, inline in "+
		"load balancer PUTs through the load balancer's writer: the pools of one load balancer that change in one flush share a write.", localPoll),
		fmt.Sprintf("During the churn: %d load balancer and pool writes in %.0f s (%.1f per second), for %d changes of ready nodes measured and %d overtaken.",
			poolWrites, ph.Seconds, float64(poolWrites)/ph.Seconds, len(lags), superseded)}
	writeResult(t, res)
	for _, e := range exact {
		t.Error(e)
	}
}

type localChurnRun struct {
	b      *bench
	nodeIP map[string]string
}

func localName(i int) string { return fmt.Sprintf("app-%03d", i) }

// createNodes registers the nodes with pod CIDRs of their own, so kwok gives pods IPs
// (EndpointSlices need one).
func (lc *localChurnRun) createNodes() {
	ms := lc.b.env.Machines
	lc.b.parallel(len(ms), func(ctx context.Context, i int) error {
		n := framework.NewNode(ms[i], framework.NodeOptions{ProviderID: true})
		cidr := fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
		_, err := lc.b.env.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
}

// createApps creates the namespace, one Deployment per service, then the Local services.
func (lc *localChurnRun) createApps(replicas []int32) {
	kube := lc.b.env.Kube
	if _, err := kube.CoreV1().Namespaces().Create(lc.b.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: localNS}}, metav1.CreateOptions{}); err != nil {
		lc.b.t.Fatal(err)
	}
	lc.b.parallel(len(replicas), func(ctx context.Context, i int) error {
		name := localName(i)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: localNS}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas[i]), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}},
		}}
		_, err := kube.AppsV1().Deployments(localNS).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
	lc.b.parallel(len(replicas), func(ctx context.Context, i int) error {
		svc := service(localNS, localName(i), int32(2000+i))
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		_, err := kube.CoreV1().Services(localNS).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
}

// view is, per service, the node IPs its EndpointSlices say are ready and those its pool in
// azsim holds (nil: no pool yet).
type localView struct {
	want, got map[string][]string
	hasPool   map[string]bool
}

func (lc *localChurnRun) view(ctx context.Context) (*localView, error) {
	slices_, err := lc.b.env.Kube.DiscoveryV1().EndpointSlices(localNS).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	v := &localView{want: map[string][]string{}, got: map[string][]string{}, hasPool: map[string]bool{}}
	for i := range localServices {
		v.want[localName(i)] = nil
	}
	for _, s := range slices_.Items {
		svc := s.Labels[discoveryv1.LabelServiceName]
		for _, ep := range s.Endpoints {
			c := ep.Conditions
			if ep.NodeName == nil || (c.Ready != nil && !*c.Ready) || (c.Terminating != nil && *c.Terminating) {
				continue
			}
			if ip := lc.nodeIP[*ep.NodeName]; ip != "" && !slices.Contains(v.want[svc], ip) {
				v.want[svc] = append(v.want[svc], ip)
			}
		}
	}
	lbs, err := lc.b.env.Azsim.List(ctx, "Microsoft.Network/loadBalancers")
	if err != nil {
		return nil, err
	}
	byPool := map[string]string{}
	for i := range localServices {
		byPool[azurenames.LocalServicePoolName(localNS, localName(i), azurenames.IPv4)] = localName(i)
	}
	for _, lb := range lbs {
		props, _ := lb["properties"].(map[string]any)
		pools, _ := props["backendAddressPools"].([]any)
		for _, p := range pools {
			pm, _ := p.(map[string]any)
			pn, _ := pm["name"].(string)
			svc, ok := byPool[pn]
			if !ok {
				continue
			}
			v.hasPool[svc] = true
			pp, _ := pm["properties"].(map[string]any)
			addrs, _ := pp["loadBalancerBackendAddresses"].([]any)
			for _, a := range addrs {
				ap, _ := a.(map[string]any)["properties"].(map[string]any)
				if ip, _ := ap["ipAddress"].(string); ip != "" {
					v.got[svc] = append(v.got[svc], ip)
				}
			}
		}
	}
	for k := range v.want {
		slices.Sort(v.want[k])
		slices.Sort(v.got[k])
	}
	return v, nil
}

// waitPoolsMatch waits until every service has its pool and every pool equals the ready
// nodes of the service's EndpointSlices.
func (lc *localChurnRun) waitPoolsMatch(what string, timeout time.Duration) time.Duration {
	began := time.Now()
	lc.b.env.WaitFor(what, func(ctx context.Context) (bool, error) {
		v, err := lc.view(ctx)
		if err != nil {
			return false, err
		}
		off := 0
		var first string
		for svc, want := range v.want {
			if !v.hasPool[svc] || !slices.Equal(want, v.got[svc]) {
				if off == 0 {
					first = fmt.Sprintf("%s: pool %v, endpoints on %v", svc, v.got[svc], want)
				}
				off++
			}
		}
		return off == 0, fmt.Errorf("%d pools differ from their endpoints (%s)", off, first)
	}, timeout)
	d := time.Since(began)
	lc.b.t.Logf("%s match after %s", what, d.Round(time.Millisecond))
	return d
}

// churn runs random scale and pod-delete operations for localChurn and returns their number.
func (lc *localChurnRun) churn(rng *rand.Rand, replicas []int32) int {
	kube := lc.b.env.Kube
	ctx := lc.b.ctx()
	tick := time.NewTicker(time.Second / time.Duration(localOps))
	defer tick.Stop()
	end := time.Now().Add(localChurn)
	ops := 0
	for time.Now().Before(end) {
		<-tick.C
		i := rng.IntN(localServices)
		name := localName(i)
		if rng.IntN(2) == 0 {
			replicas[i] = rng.Int32N(localMaxReplicas + 1)
			sc, err := kube.AppsV1().Deployments(localNS).GetScale(ctx, name, metav1.GetOptions{})
			if err != nil {
				lc.b.t.Fatal(err)
			}
			sc.Spec.Replicas = replicas[i]
			if _, err := kube.AppsV1().Deployments(localNS).UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
				lc.b.t.Fatal(err)
			}
		} else {
			pods, err := kube.CoreV1().Pods(localNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name, ResourceVersion: "0"})
			if err != nil {
				lc.b.t.Fatal(err)
			}
			if len(pods.Items) > 0 {
				// The list is not ordered: sort so that the seed picks the same pod position.
				sort.Slice(pods.Items, func(a, b int) bool { return pods.Items[a].Name < pods.Items[b].Name })
				p := pods.Items[rng.IntN(len(pods.Items))]
				if err := kube.CoreV1().Pods(localNS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
					lc.b.t.Fatal(err)
				}
			}
		}
		ops++
	}
	lc.b.t.Logf("churn: %d operations in %s", ops, localChurn)
	return ops
}

// exactCheck compares every pool with the nodes of the service's ready, non-terminating pods
// (from the pods themselves, not the EndpointSlices).
func (lc *localChurnRun) exactCheck() []string {
	ctx := lc.b.ctx()
	v, err := lc.view(ctx)
	if err != nil {
		lc.b.t.Fatal(err)
	}
	pods, err := lc.b.env.Kube.CoreV1().Pods(localNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		lc.b.t.Fatal(err)
	}
	want := map[string][]string{}
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if !ready || p.DeletionTimestamp != nil {
			continue
		}
		app := p.Labels["app"]
		if ip := lc.nodeIP[p.Spec.NodeName]; ip != "" && !slices.Contains(want[app], ip) {
			want[app] = append(want[app], ip)
		}
	}
	var bad []string
	for i := range localServices {
		svc := localName(i)
		slices.Sort(want[svc])
		if !v.hasPool[svc] || !slices.Equal(want[svc], v.got[svc]) {
			bad = append(bad, fmt.Sprintf("%s: pool %v (exists %v), ready pods on %v", svc, v.got[svc], v.hasPool[svc], want[svc]))
		}
	}
	return bad
}

// lagWatcher polls the EndpointSlices and pools and times every change of a service's ready
// nodes until its pool holds exactly them.
type lagWatcher struct {
	lc         *localChurnRun
	began      time.Time
	done       chan struct{}
	wg         sync.WaitGroup
	lags       []float64
	superseded int
	series     report.Series
}

type lagState struct {
	want    []string
	since   time.Time
	pending bool
}

func (lc *localChurnRun) watch() *lagWatcher {
	w := &lagWatcher{lc: lc, began: time.Now(), done: make(chan struct{}), series: report.Series{Name: "EndpointSlice change → pool"}}
	w.wg.Go(w.run)
	return w
}

func (w *lagWatcher) run() {
	states := map[string]*lagState{}
	tick := time.NewTicker(localPoll)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v, err := w.lc.view(ctx)
		cancel()
		if err != nil {
			w.lc.b.t.Logf("lag watcher: %v", err)
			continue
		}
		now := time.Now()
		for svc, want := range v.want {
			st := states[svc]
			if st == nil {
				states[svc] = &lagState{want: want}
				continue
			}
			if !slices.Equal(st.want, want) {
				if st.pending {
					w.superseded++
				}
				st.want, st.since, st.pending = want, now, true
			}
			if st.pending && slices.Equal(v.got[svc], st.want) {
				lag := now.Sub(st.since).Seconds()
				w.lags = append(w.lags, lag)
				w.series.X = append(w.series.X, st.since.Sub(w.began).Seconds())
				w.series.Y = append(w.series.Y, lag)
				st.pending = false
			}
		}
	}
}

// stop ends the watcher; it returns the lags measured (seconds) and the changes overtaken by
// a later one before their pool caught up.
func (w *lagWatcher) stop() ([]float64, int) {
	close(w.done)
	w.wg.Wait()
	return w.lags, w.superseded
}

// percentile of sorted values (q in [0, 1]); 0 for none.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}
