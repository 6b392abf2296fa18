package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// Three load balancer configurations:
//   - kubernetes: the default, no selectors;
//   - lb-a: services labelled team=a, nodes labelled lb=a;
//   - lb-b: primary VM set pool1 (its nodes always go there), no selectors.
//
// pool0 has three nodes (one labelled lb=a), pool1 two.
func mslbConfig(allowB bool) map[string]any {
	return map[string]any{
		"loadBalancerBackendPoolConfigurationType":       "nodeIP",
		"loadBalancerBackendPoolUpdateIntervalInSeconds": 3,
		"multipleStandardLoadBalancerConfigurations": []map[string]any{
			{"name": lbCluster, "primaryVMSet": "pool-none"},
			{"name": "lb-a", "primaryVMSet": "pool-a-none",
				"serviceLabelSelector": map[string]any{"matchLabels": map[string]string{"team": "a"}},
				"nodeSelector":         map[string]any{"matchLabels": map[string]string{"lb": "a"}}},
			{"name": "lb-b", "primaryVMSet": "pool1", "allowServicePlacement": allowB},
		},
	}
}

type mslbEnv struct {
	*lbEnv
	byPool map[string][]framework.Machine
}

func mslbStart(t *testing.T) *mslbEnv {
	t.Helper()
	topo := lbTopology()
	topo.ScaleSets = append(topo.ScaleSets, topology.ScaleSet{ResourceGroup: topo.ResourceGroups[0], Name: "pool1", Capacity: 2, Zones: []string{"1", "2"}})
	e := framework.Start(t, framework.Options{Topology: topo, CloudConfig: mslbConfig(true)})
	nodesRequireBinary(t, framework.CCMBinaryName)
	m := &mslbEnv{byPool: map[string][]framework.Machine{}}
	for i, mc := range e.Machines {
		m.byPool[mc.ScaleSet] = append(m.byPool[mc.ScaleSet], mc)
		var labels map[string]string
		if mc.ScaleSet == "pool0" && len(m.byPool["pool0"]) == 1 {
			labels = map[string]string{"lb": "a"}
		}
		// Pod CIDRs of their own, so kwok gives every pod an IP (EndpointSlices need one).
		n := framework.NewNode(mc, framework.NodeOptions{ProviderID: true, Labels: labels})
		cidr := fmt.Sprintf("10.244.%d.0/24", i)
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
		if _, err := e.Kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.StartCCM()
	for _, mc := range e.Machines {
		e.WaitFor("node "+mc.NodeName+" initialized", e.NodeInitialized(mc.NodeName), lbWait)
	}
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	m.lbEnv = &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: "default"}
	return m
}

func (m *mslbEnv) with(t *testing.T) *mslbEnv {
	c := *m
	c.lbEnv = m.lbEnv.with(t)
	return &c
}

// lbOf names the load balancer holding objects of the service ("" none; "a,b" several).
func (m *mslbEnv) lbOf(st *azState, svc *corev1.Service) string {
	var on []string
	for name, lb := range st.LBs {
		if len(lbObjectsOf(lb, azurenames.ServiceLBName(svc.UID))) > 0 {
			on = append(on, name)
		}
	}
	sort.Strings(on)
	return strings.Join(on, ",")
}

// onLB waits until the service is on exactly the named load balancer and has an IP.
func (m *mslbEnv) onLB(name, lb string) *corev1.Service {
	m.t.Helper()
	svc := m.waitIP(name)
	m.waitFor(name+" on "+lb, func(ctx context.Context) (bool, error) {
		st, err := m.state(ctx)
		if err != nil {
			return false, err
		}
		if got := m.lbOf(st, svc); got != lb {
			return false, fmt.Errorf("%s is on %q", name, got)
		}
		return true, nil
	}, lbWait)
	return svc
}

// event holds when the named object has an event with the reason.
func (m *mslbEnv) event(kind, name, reason string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		evs, err := m.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == kind && ev.Reason == reason {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event on %s %s", reason, kind, name)
	}
}

// eventWith holds when the named object has an event with the reason whose message contains
// text.
func (m *mslbEnv) eventWith(kind, name, reason, text string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		evs, err := m.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == kind && ev.Reason == reason && strings.Contains(ev.Message, text) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event with %q on %s %s", reason, text, kind, name)
	}
}

func (m *mslbEnv) ipOf(name string) string {
	m.t.Helper()
	s := m.waitIP(name)
	return ingressIPs(s)[0]
}

// TestMultipleStandardLoadBalancers runs the multiple-load-balancer scenarios against one cluster with three
// load balancer configurations, in order (later groups build on earlier ones).
func TestMultipleStandardLoadBalancers(t *testing.T) {
	working(t)
	m := mslbStart(t)
	pool0, pool1 := m.byPool["pool0"], m.byPool["pool1"]
	if len(pool0) != 3 || len(pool1) != 2 {
		t.Fatalf("machines: %d in pool0, %d in pool1", len(pool0), len(pool1))
	}
	ipsOf := func(ms ...framework.Machine) []string {
		var out []string
		for _, mc := range ms {
			out = append(out, mc.InternalIPs[0])
		}
		sort.Strings(out)
		return out
	}

	t.Run("service placement: annotation, label selector, fewest rules", func(t *testing.T) {
		m := m.with(t)
		m.create(lbService("mslb-ann", map[string]string{annotations.LoadBalancerConfigs: "lb-b"}))
		m.onLB("mslb-ann", "lb-b")
		team := lbService("mslb-team", nil)
		team.Labels = map[string]string{"team": "a"}
		m.create(team)
		m.onLB("mslb-team", "lb-a")
		// Plain services may not use lb-a (its selector); kubernetes has fewer rules than lb-b.
		m.create(lbService("mslb-plain1", nil))
		m.onLB("mslb-plain1", lbCluster)
		// kubernetes 1 rule, lb-b 1 rule: the tie goes to the first configured.
		m.create(lbService("mslb-plain2", nil))
		m.onLB("mslb-plain2", lbCluster)
		// kubernetes 2 rules, lb-b 1: lb-b.
		m.create(lbService("mslb-plain3", nil))
		m.onLB("mslb-plain3", "lb-b")
		m.waitFor("LoadBalancerPlaced event", m.event("Service", "mslb-plain3", "LoadBalancerPlaced"), lbWait)
	})

	t.Run("node placement: primary VM set, node selector, fewest nodes", func(t *testing.T) {
		m := m.with(t)
		// pool0[0] (lb=a) → lb-a by its node selector; pool1 → lb-b, its primary VM set; the
		// other pool0 nodes go, in name order, to the selector-less kubernetes or lb-b with
		// the fewest nodes (ties: kubernetes, configured first).
		var all []framework.Machine
		all = append(append(all, pool0...), pool1...)
		sort.Slice(all, func(i, j int) bool { return all[i].NodeName < all[j].NodeName })
		placed := map[string][]framework.Machine{}
		for _, mc := range all {
			switch {
			case mc.NodeName == pool0[0].NodeName:
				placed["lb-a"] = append(placed["lb-a"], mc)
			case mc.ScaleSet == "pool1" || len(placed["lb-b"]) < len(placed[lbCluster]):
				placed["lb-b"] = append(placed["lb-b"], mc)
			default:
				placed[lbCluster] = append(placed[lbCluster], mc)
			}
		}
		want := map[string][]string{}
		for lb, ms := range placed {
			want[lb] = ipsOf(ms...)
		}
		t.Logf("expected placement %v", want)
		m.waitFor("nodes placed", func(ctx context.Context) (bool, error) {
			st, err := m.state(ctx)
			if err != nil {
				return false, err
			}
			for lb, ips := range want {
				if got := poolIPs(st.LBs[lb], lbCluster); !slices.Equal(got, ips) {
					return false, fmt.Errorf("pool of %s = %v, want %v", lb, got, ips)
				}
			}
			return true, nil
		}, lbWait)
	})

	t.Run("label change moves the service with its IP", func(t *testing.T) {
		m := m.with(t)
		ip := m.ipOf("mslb-team")
		m.update("mslb-team", func(s *corev1.Service) { s.Labels = nil })
		// kubernetes and lb-b have 2 rules each: the first configured.
		svc := m.onLB("mslb-team", lbCluster)
		eqs(t, "IP after the move", ingressIPs(svc), []string{ip})
		m.waitFor("LoadBalancerMoved event", m.event("Service", "mslb-team", "LoadBalancerMoved"), lbWait)
		m.waitFor("empty lb-a deleted", func(ctx context.Context) (bool, error) {
			st, err := m.state(ctx)
			if err != nil {
				return false, err
			}
			return st.LBs["lb-a"] == nil, fmt.Errorf("lb-a still exists")
		}, lbWait)
	})

	t.Run("two services sharing an internal IP are never moved", func(t *testing.T) {
		m := m.with(t)
		ann := map[string]string{annotations.Internal: "true", annotations.IPv4: "10.240.0.250"}
		for i, name := range []string{"mslb-share1", "mslb-share2"} {
			s := lbService(name, ann, lbTCP(int32(8081+i)))
			s.Labels = map[string]string{"team": "a"}
			m.create(s)
		}
		s1, s2 := m.onLB("mslb-share1", "lb-a-internal"), m.onLB("mslb-share2", "lb-a-internal")
		eqs(t, "shared IPs", append(ingressIPs(s1), ingressIPs(s2)...), []string{"10.240.0.250", "10.240.0.250"})
		both := func() {
			t.Helper()
			st := m.mustState()
			if a, b := m.lbOf(st, s1), m.lbOf(st, s2); a != "lb-a-internal" || b != "lb-a-internal" {
				t.Fatalf("share1 on %q, share2 on %q", a, b)
			}
		}
		// share2 loses the label: moving it would take the frontend share1 uses; refused on
		// share2, the service whose change asked for it, and nothing moves.
		m.update("mslb-share2", func(s *corev1.Service) { s.Labels = nil })
		m.waitFor("the move refused on share2", m.eventWith("Service", "mslb-share2", "DeletingFrontendIPConfiguration", `cannot migrate from load balancer "lb-a-internal"`), lbWait)
		m.waitFor("the service controller's failure on share2", m.eventWith("Service", "mslb-share2", "SyncLoadBalancerFailed", "cannot migrate"), lbWait)
		both()
		// share1 loses it too: refused as well.
		m.update("mslb-share1", func(s *corev1.Service) { s.Labels = nil })
		m.waitFor("the move refused on share1", m.eventWith("Service", "mslb-share1", "DeletingFrontendIPConfiguration", "cannot migrate"), lbWait)
		both()
		for _, n := range []string{"mslb-share1", "mslb-share2"} {
			if ok, _ := m.event("Service", n, "LoadBalancerMoved")(lbCtx(t)); ok {
				t.Fatalf("%s got LoadBalancerMoved", n)
			}
			eqs(t, n+" IP", ingressIPs(m.get(n)), []string{"10.240.0.250"})
		}
		// The configurations annotation with a requested IP is refused before anything is
		// written.
		m.create(lbService("mslb-conflict", map[string]string{annotations.Internal: "true", annotations.IPv4: "10.240.0.251",
			annotations.LoadBalancerConfigs: "lb-b"}, lbTCP(8090)))
		m.waitFor("the conflict refused", m.eventWith("Service", "mslb-conflict", "ConflictingLoadBalancerConfiguration",
			`service "mslb-conflict" has conflicting load balancer configuration`), lbWait)
		if on := m.lbOf(m.mustState(), m.get("mslb-conflict")); on != "" {
			t.Fatalf("mslb-conflict is on %s", on)
		}
	})

	t.Run("Local service pool follows pods 3 → 30 → 0", func(t *testing.T) {
		m := m.with(t)
		m.deployment("mslb-local", 3)
		svc := lbService("mslb-local", nil)
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		m.create(svc)
		svc = m.waitIP("mslb-local")
		lb := m.lbOf(m.mustState(), svc)
		if lb == "" || strings.Contains(lb, ",") {
			t.Fatalf("local service on %q", lb)
		}
		pool := azurenames.LocalServicePoolName("default", "mslb-local", azurenames.IPv4)
		m.poolFollowsPods(lb, pool, "mslb-local", 3)
		m.scale("mslb-local", 30)
		m.poolFollowsPods(lb, pool, "mslb-local", 30)

		// Killed in the middle of a flush window: the updater has queued the scale-down but
		// not flushed it; the rest of it lands while the CCM is down.
		m.killInFlushWindow(lb, pool, "mslb-local", 2)

		// An injected ARM failure on the flush (a load balancer PUT: Local pools are written
		// inline, merged per load balancer): retried with backoff until it lands.
		f, err := m.Azsim.AddFault(context.Background(), middleware.Fault{Kind: middleware.FaultConflict, Class: middleware.Write,
			ResourceType: "loadBalancers", PathContains: "/loadBalancers/" + lb, Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		m.scale("mslb-local", 0)
		m.poolFollowsPods(lb, pool, "mslb-local", 0)
		m.waitFor("LoadBalancerBackendPoolUpdateFailed event", m.event("Service", "mslb-local", "LoadBalancerBackendPoolUpdateFailed"), lbWait)
		faults, err := m.Azsim.Faults(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range faults {
			if x.ID == f.ID && x.Hits != 2 {
				t.Errorf("fault hit %d times, want 2", x.Hits)
			}
		}
		// Back to Cluster: the dedicated pool goes.
		m.update("mslb-local", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		})
		m.waitFor("dedicated pool removed", func(ctx context.Context) (bool, error) {
			st, err := m.state(ctx)
			if err != nil {
				return false, err
			}
			for _, p := range st.LBs[lb].Properties.BackendAddressPools {
				if *p.Name == pool {
					return false, fmt.Errorf("pool %s still on %s", pool, lb)
				}
			}
			return true, nil
		}, lbWait)
	})

	t.Run("allowServicePlacement false after a restart: placements kept, no new service", func(t *testing.T) {
		m := m.with(t)
		before := m.mustState()
		ann := m.get("mslb-ann")
		if err := m.WriteCloudConfig(mslbConfig(false)); err != nil {
			t.Fatal(err)
		}
		m.RestartCCM()
		m.create(lbService("mslb-drain", map[string]string{annotations.LoadBalancerConfigs: "lb-b"}))
		m.waitFor("NoEligibleLoadBalancer on mslb-drain", m.event("Service", "mslb-drain", "NoEligibleLoadBalancer"), lbWait)
		if got := m.lbOf(m.mustState(), ann); got != "lb-b" || m.lbOf(before, ann) != "lb-b" {
			t.Fatalf("mslb-ann moved to %q after the restart", got)
		}
	})

	t.Run("deleting every service leaves nothing", func(t *testing.T) {
		m := m.with(t)
		// share2 first: share1's frontend (named after it) stays while share2's rules use it.
		for _, n := range []string{"mslb-ann", "mslb-team", "mslb-plain1", "mslb-plain2", "mslb-plain3", "mslb-share2", "mslb-share1", "mslb-conflict", "mslb-local", "mslb-drain"} {
			m.deleteAndWaitGone(m.get(n))
		}
		m.waitFor("every load balancer deleted", func(ctx context.Context) (bool, error) {
			st, err := m.state(ctx)
			if err != nil {
				return false, err
			}
			if len(st.LBs) > 0 {
				return false, fmt.Errorf("%d load balancers left: %v", len(st.LBs), sortedKeys(st.LBs))
			}
			return true, nil
		}, lbWait)
	})
}

func (m *mslbEnv) deployment(name string, replicas int32) {
	m.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: to.Ptr(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}},
	}}
	if _, err := m.Kube.AppsV1().Deployments("default").Create(lbCtx(m.t), d, metav1.CreateOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mslbEnv) scale(name string, replicas int32) {
	m.t.Helper()
	ctx := lbCtx(m.t)
	sc, err := m.Kube.AppsV1().Deployments("default").GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := m.Kube.AppsV1().Deployments("default").UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

// readyPods holds when exactly n pods of the app are Ready (and none is terminating).
func (m *mslbEnv) readyPods(app string, n int) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		_, count, err := m.podNodes(ctx, app)
		if err != nil {
			return false, err
		}
		if count != n {
			return false, fmt.Errorf("%d ready pods of %s, want %d", count, app, n)
		}
		return true, nil
	}
}

// podNodes are the internal IPs of the nodes running ready pods of the app, and the number of
// pods (terminating ones count, so a wait for n sees the scale-down finished).
func (m *mslbEnv) podNodes(ctx context.Context, app string) ([]string, int, error) {
	pods, err := m.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, 0, err
	}
	nodeIP := map[string]string{}
	for _, mc := range m.Machines {
		nodeIP[mc.NodeName] = mc.InternalIPs[0]
	}
	var ips []string
	count := 0
	for _, p := range pods.Items {
		count++
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if !ready || p.DeletionTimestamp != nil {
			continue
		}
		if ip := nodeIP[p.Spec.NodeName]; ip != "" && !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	sort.Strings(ips)
	return ips, count, nil
}

// poolFollowsPods waits until n pods are ready and the dedicated pool holds exactly their nodes.
func (m *mslbEnv) poolFollowsPods(lb, pool, app string, n int) {
	m.t.Helper()
	began := time.Now()
	m.waitFor(fmt.Sprintf("%d pods of %s ready", n, app), m.readyPods(app, n), 3*lbWait)
	m.waitFor(fmt.Sprintf("pool %s follows %d pods", pool, n), func(ctx context.Context) (bool, error) {
		want, _, err := m.podNodes(ctx, app)
		if err != nil {
			return false, err
		}
		st, err := m.state(ctx)
		if err != nil {
			return false, err
		}
		if got := poolIPs(st.LBs[lb], pool); !slices.Equal(got, want) {
			return false, fmt.Errorf("pool %s = %v, want %v", pool, got, want)
		}
		return true, nil
	}, lbWait)
	m.t.Logf("pool %s followed %d pods %s after the scale", pool, n, time.Since(began).Round(time.Millisecond))
}

// mslbFlushWindow is the flush interval of the kill-in-the-window scenario: wide enough that
// the kill reliably lands between the queued change and its flush.
const mslbFlushWindow = 10

// killInFlushWindow restarts the CCM with a flush interval of mslbFlushWindow seconds, waits
// for its start-up flush (which starts a fresh window), scales the app to n, and SIGKILLs the
// CCM as soon as the local-pools controller has queued the EndpointSlice change (its pending
// gauge), before the flush: the pool must still be as before at that point. Restarted, the CCM
// must bring the pool to the nodes of the n pods (level-triggered: nothing of the change lost).
func (m *mslbEnv) killInFlushWindow(lb, pool, app string, n int32) {
	t := m.t
	t.Helper()
	cfg := mslbConfig(true)
	cfg["loadBalancerBackendPoolUpdateIntervalInSeconds"] = mslbFlushWindow
	if err := m.WriteCloudConfig(cfg); err != nil {
		t.Fatal(err)
	}
	m.RestartCCM()
	m.waitFor("the start-up flush of the restarted CCM", func(ctx context.Context) (bool, error) {
		flushed, err := m.ccmMetric(ctx, "azure_ccm_multislb_local_pool_flushes_total")
		if err != nil {
			return false, err
		}
		pending, err := m.ccmMetric(ctx, "azure_ccm_multislb_local_pools_pending")
		if err != nil {
			return false, err
		}
		return flushed >= 1 && pending == 0, fmt.Errorf("%v flushes, %v pools pending", flushed, pending)
	}, lbWait)
	before := poolIPs(m.mustState().LBs[lb], pool)
	t.Logf("pool %s before the scale to %d: %v", pool, n, before)

	m.scale(app, n)
	queued := time.Now()
	m.waitFor("the EndpointSlice change queued", func(ctx context.Context) (bool, error) {
		pending, err := m.ccmMetric(ctx, "azure_ccm_multislb_local_pools_pending")
		if err != nil {
			return false, err
		}
		return pending >= 1, fmt.Errorf("%v pools pending", pending)
	}, lbWait)
	p := m.CCM()
	if err := syscall.Kill(-p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	_ = m.StopCCM() // forgets the killed process ("exited on its own" is expected)
	t.Logf("CCM killed %s after the scale to %d", time.Since(queued).Round(time.Millisecond), n)
	if got := poolIPs(m.mustState().LBs[lb], pool); !slices.Equal(got, before) {
		t.Fatalf("the pool was flushed before the kill (%v, was %v): the kill missed the window", got, before)
	}

	m.waitFor(fmt.Sprintf("pods down to %d", n), m.readyPods(app, int(n)), lbWait)
	m.StartCCM()
	m.poolFollowsPods(lb, pool, app, int(n))
}

// ccmMetric sums every sample of a metric family of the running CCM (0 when absent).
func (m *mslbEnv) ccmMetric(ctx context.Context, family string) (float64, error) {
	text, err := m.CCMMetrics(ctx)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(line, " ")
		if !ok || (name != family && !strings.HasPrefix(name, family+"{")) {
			continue
		}
		if strings.Contains(name, "{") && !strings.HasSuffix(name, "}") {
			// Label values with spaces: the value is the last field.
			rest = line[strings.LastIndex(line, " ")+1:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
