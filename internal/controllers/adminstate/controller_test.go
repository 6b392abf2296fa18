package adminstate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	azarm "github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate/planner"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/testutil"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

const (
	testRG      = "rg-cluster"
	testCluster = "kubernetes"
)

type testEnv struct {
	t        *testing.T
	srv      *server.Server
	pools    *armnetwork.LoadBalancerBackendAddressPoolsClient
	lbs      *armnetwork.LoadBalancersClient
	lb       *loadbalancer.LoadBalancer
	writers  *writers.Set
	kube     *fake.Clientset
	ctrl     *Controller
	recorder *record.FakeRecorder
	// placedNodes: pools hold a subset of the nodes (multiple standard load balancers).
	placedNodes bool
	nodes       []*v1.Node

	mu      sync.Mutex
	updates map[string]int // node updates by name (fake client actions)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testNode(i int) *v1.Node {
	name := fmt.Sprintf("node-%d", i)
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(fmt.Sprintf("uid-%d", i))},
		Spec: v1.NodeSpec{ProviderID: fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/pool0/virtualMachines/%d",
			topology.DefaultSubscriptionID, testRG, i)},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.240.0.%d", 10+i)},
			{Type: v1.NodeInternalIP, Address: fmt.Sprintf("fd00::%d", 10+i)}}}}
}

// newTestEnv starts azsim in-process, creates a dual-stack public and an internal service on
// nodeIP pools (so there are four cluster pools), and starts the controller.
func newTestEnv(t *testing.T, n int, o Options) *testEnv {
	t.Helper()
	return newTestEnvWith(t, n, o, nil)
}

func newTestEnvWith(t *testing.T, n int, o Options, edit func(*config.Config)) *testEnv {
	t.Helper()
	return newTestEnvFull(t, n, o, edit, nil)
}

// newTestEnvFull is newTestEnvWith where the events in eventsFirst exist before the controller
// starts and are delivered to it before the node informer lists anything (the events informer
// is started and synced first).
func newTestEnvFull(t *testing.T, n int, o Options, edit func(*config.Config), eventsFirst []*v1.Event) *testEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Close() })
	if _, err := srv.Seed(ctxT(t), &topology.Topology{
		ResourceGroups: []string{testRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: testRG, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/8", "fd00::/48"},
			Subnets: []topology.Subnet{{Name: "subnet", AddressPrefix: "10.240.0.0/16", AddressPrefixV6: "fd00::/64"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: testRG, Name: "nsg"}},
	}); err != nil {
		t.Fatal(err)
	}
	opts := azcore.ClientOptions{
		Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: srv.URL() + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Endpoint: srv.URL(), Audience: "https://management.azure.com/"}}},
		Transport: srv.HTTPClient(),
	}
	cred, err := azidentity.NewClientSecretCredential(server.DefaultTenantID, server.DefaultClientID, server.DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := armnetwork.NewClientFactory(topology.DefaultSubscriptionID, cred, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{SubscriptionID: topology.DefaultSubscriptionID, ResourceGroup: testRG, Location: "eastus",
		VnetName: "vnet", SubnetName: "subnet", SecurityGroupName: "nsg", LoadBalancerSKU: config.LoadBalancerSKUStandard,
		LoadBalancerBackendPoolConfigurationType: config.BackendPoolNodeIP}
	if edit != nil {
		edit(cfg)
	}
	e := &testEnv{t: t, srv: srv, pools: f.NewLoadBalancerBackendAddressPoolsClient(), lbs: f.NewLoadBalancersClient(), updates: map[string]int{}}
	var objs []runtime.Object
	for i := 0; i < n; i++ {
		nd := testNode(i)
		e.nodes = append(e.nodes, nd)
		objs = append(objs, nd)
	}
	e.kube = fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(e.kube, 0)
	// The load balancer's membership writes keep draining nodes Down, as in the CCM.
	e.writers = writers.New(writers.Options{Network: f, PollFrequency: 20 * time.Millisecond})
	parts, err := loadbalancer.Build(loadbalancer.BuildOptions{Config: cfg, Writers: e.writers, Zones: []string{"1", "2", "3"},
		PublicIPs: azarm.NewPublicIPCache("publicips", f, 0, nil, nil), PrivateLinks: azarm.NewPrivateLinkServiceCache(f, 0, nil, nil),
		PoolEntries: PoolEntries(factory.Core().V1().Nodes().Lister())})
	if err != nil {
		t.Fatal(err)
	}
	e.lb = parts.LoadBalancer
	for i, svc := range []*v1.Service{dualStackService("11111111-1111-1111-1111-111111111111", "web", nil),
		dualStackService("22222222-2222-2222-2222-222222222222", "internal", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true"})} {
		if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, e.nodes); err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
	}

	e.kube.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		e.mu.Lock()
		e.updates[a.(k8stesting.UpdateAction).GetObject().(*v1.Node).Name]++
		e.mu.Unlock()
		return false, nil, nil
	})
	e.recorder = record.NewFakeRecorder(1000)
	o.ClusterName, o.Kube, o.Recorder = testCluster, e.kube, e.recorder
	o.LoadBalancers, o.LoadBalancerIDs = e.writers.LoadBalancers, plan.LoadBalancerIDs(cfg, testCluster)
	o.Nodes, o.Events = factory.Core().V1().Nodes(), factory.Core().V1().Events()
	eventsFactory := factory
	if eventsFirst != nil {
		eventsFactory = informers.NewSharedInformerFactory(e.kube, 0)
		o.Events = eventsFactory.Core().V1().Events()
		for _, ev := range eventsFirst {
			if _, err := e.kube.CoreV1().Events(ev.Namespace).Create(ctxT(t), ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if o.RetryBase == 0 {
		o.RetryBase = 20 * time.Millisecond
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl = c
	if eventsFirst != nil {
		eventsFactory.Start(ctx.Done())
		eventsFactory.WaitForCacheSync(ctx.Done())
		// The handlers have queued the listed events while no node is known yet.
		testutil.WaitFor(t, "the listed events queued", func() bool { return c.queue.Len() == len(eventsFirst) })
	}
	factory.Start(ctx.Done())
	go c.Run(ctx)
	return e
}

func dualStackService(uid, name string, ann map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), Annotations: ann},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, IPFamilies: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
}

var testPools = [][2]string{{"kubernetes", "kubernetes"}, {"kubernetes", "kubernetes-IPv6"}, {"kubernetes-internal", "kubernetes"}, {"kubernetes-internal", "kubernetes-IPv6"}}

// states reads every cluster pool from azsim: address -> admin state ("" when unset), per pool.
func (e *testEnv) states(ctx context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, p := range testPools {
		resp, err := e.pools.Get(ctx, testRG, p[0], p[1], nil)
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, a := range resp.Properties.LoadBalancerBackendAddresses {
			s := ""
			if a.Properties.AdminState != nil {
				s = string(*a.Properties.AdminState)
			}
			m[*a.Properties.IPAddress] = s
		}
		out[p[0]+"/"+p[1]] = m
	}
	return out, nil
}

// waitStates waits until every entry of the nodes in down is Down and every other entry is
// None or unset.
func (e *testEnv) waitStates(down ...int) {
	e.t.Helper()
	isDown := map[string]bool{}
	for _, i := range down {
		for _, a := range e.nodes[i].Status.Addresses {
			isDown[a.Address] = true
		}
	}
	ctx := ctxT(e.t)
	testutil.Eventually(e.t, fmt.Sprintf("the admin states (down: nodes %v)", down), func() error {
		st, err := e.states(ctx)
		if err != nil {
			return err
		}
		for _, m := range st {
			if len(m) != len(e.nodes) && !e.placedNodes {
				return fmt.Errorf("pools hold %v", st)
			}
			for ip, s := range m {
				if isDown[ip] != (s == "Down") {
					return fmt.Errorf("pools hold %v", st)
				}
			}
		}
		return nil
	})
}

func (e *testEnv) setTaint(i int, taints ...v1.Taint) {
	e.t.Helper()
	ctx := ctxT(e.t)
	n, err := e.kube.CoreV1().Nodes().Get(ctx, e.nodes[i].Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Spec.Taints = taints
	if _, err := e.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) poolWrites() int64 {
	e.t.Helper()
	st, err := e.srv.Client().Stats(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Writes("backendAddressPools")
}

var outOfService = v1.Taint{Key: planner.TaintOutOfService, Effect: v1.TaintEffectNoExecute}

func TestTaintDownUntaintNone(t *testing.T) {
	e := newTestEnv(t, 3, Options{})
	e.waitStates()
	e.setTaint(1, outOfService)
	e.waitStates(1)
	// Cordon alone changes nothing: node 2 stays None while node 1 is restored.
	e.setTaint(2, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	e.setTaint(1)
	e.waitStates()
	// Manually applied spot taint acts the same.
	e.setTaint(0, v1.Taint{Key: planner.TaintDraining, Value: planner.TaintDrainingSpotEviction, Effect: v1.TaintEffectNoSchedule})
	e.waitStates(0)
	var sawDown, sawRestored bool
	for len(e.recorder.Events) > 0 {
		ev := <-e.recorder.Events
		sawDown = sawDown || containsAll(ev, ReasonDown, "node-1")
		sawRestored = sawRestored || containsAll(ev, ReasonRestored)
	}
	if !sawDown || !sawRestored {
		t.Errorf("events: down=%v restored=%v", sawDown, sawRestored)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !contains(s, p) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestManyNodesOneWritePerPool(t *testing.T) {
	const n = 30
	e := newTestEnv(t, n, Options{})
	e.waitStates()
	before := e.poolWrites()
	all := make([]int, n)
	var wg sync.WaitGroup
	for i := range all {
		all[i] = i
		wg.Add(1)
		go func() { defer wg.Done(); e.setTaint(i, outOfService) }()
	}
	wg.Wait()
	e.waitStates(all...)
	if got := e.poolWrites() - before; got != int64(len(testPools)) {
		st, _ := e.srv.Client().Stats(ctxT(t))
		t.Errorf("%d pool writes for %d nodes on %d pools, want one per pool: %+v", got, n, len(testPools), st.Requests)
	}
}

func TestARMFailureRetried(t *testing.T) {
	e := newTestEnv(t, 2, Options{})
	e.waitStates()
	// 409 is not retried by the SDK pipeline: the controller's backoff has to.
	if _, err := e.srv.Client().AddFault(ctxT(t), middleware.Fault{Kind: middleware.FaultConflict, Class: middleware.Write,
		ResourceType: "backendAddressPools", Count: 3}); err != nil {
		t.Fatal(err)
	}
	e.setTaint(0, outOfService)
	e.waitStates(0)
	faults, err := e.srv.Client().Faults(ctxT(t))
	if err != nil || len(faults) != 1 || faults[0].Hits != 3 {
		t.Fatalf("fault hits: %+v %v", faults, err)
	}
	sawFailed := false
	testutil.WaitFor(t, "AdminStateFailed event", func() bool {
		for len(e.recorder.Events) > 0 {
			ev := <-e.recorder.Events
			sawFailed = sawFailed || contains(ev, ReasonFailed)
		}
		return sawFailed
	})
}

func preemptEvent(name string, node *v1.Node, at time.Time) *v1.Event {
	return &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		InvolvedObject: v1.ObjectReference{Kind: "Node", Name: node.Name, UID: node.UID},
		Reason:         ReasonPreemptScheduled, Type: v1.EventTypeWarning, LastTimestamp: metav1.NewTime(at)}
}

func TestPreemptScheduledTaintsOnce(t *testing.T) {
	e := newTestEnv(t, 2, Options{})
	e.waitStates()
	ctx := ctxT(t)
	if _, err := e.kube.CoreV1().Events("default").Create(ctx, preemptEvent("e1", e.nodes[1], time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStates(1)
	n, _ := e.kube.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if !planner.HasSpotTaint(n) {
		t.Fatalf("taints %v", n.Spec.Taints)
	}
	// Duplicates (another event, an update of the first) are ignored.
	if _, err := e.kube.CoreV1().Events("default").Create(ctx, preemptEvent("e2", e.nodes[1], time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An event of an old node with the same name, and a stale one, are ignored too.
	old := e.nodes[0].DeepCopy()
	old.UID = "previous-uid"
	if _, err := e.kube.CoreV1().Events("default").Create(ctx, preemptEvent("e3", old, time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Events("default").Create(ctx, preemptEvent("e4", e.nodes[0], time.Now().Add(-time.Hour)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "events processed", func() bool {
		return testutilValue(preemptEvents, "duplicate") >= 1 && testutilValue(preemptEvents, "unknown_node") >= 1 && testutilValue(preemptEvents, "stale") >= 1
	})
	e.mu.Lock()
	u0, u1 := e.updates["node-0"], e.updates["node-1"]
	e.mu.Unlock()
	if u1 != 1 || u0 != 0 {
		t.Errorf("node updates: node-0 %d, node-1 %d; want 0 and 1", u0, u1)
	}
	// The taint cleared by an operator: restored, and a new event acts again.
	e.setTaint(1)
	e.waitStates()
	if _, err := e.kube.CoreV1().Events("default").Create(ctx, preemptEvent("e5", e.nodes[1], time.Now().Add(time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStates(1)
}

// An event already in the cluster when the controller starts can be delivered before its node
// is listed: it is judged once the node cache has synced instead of being dropped as about an
// unknown node.
func TestPreemptEventBeforeNodesListed(t *testing.T) {
	before := testutilValue(preemptEvents, "unknown_node")
	e := newTestEnvFull(t, 2, Options{}, nil, []*v1.Event{preemptEvent("e1", testNode(1), time.Now())})
	e.waitStates(1)
	n, err := e.kube.CoreV1().Nodes().Get(ctxT(t), "node-1", metav1.GetOptions{})
	if err != nil || !planner.HasSpotTaint(n) {
		t.Fatalf("node-1 not tainted: %v %v", n.Spec.Taints, err)
	}
	if got := testutilValue(preemptEvents, "unknown_node") - before; got != 0 {
		t.Errorf("%v events counted as about an unknown node", got)
	}
}

func TestDeletedAndReplacedNode(t *testing.T) {
	e := newTestEnv(t, 2, Options{})
	e.waitStates()
	e.setTaint(1, outOfService)
	e.waitStates(1)
	before := e.poolWrites()
	ctx := ctxT(t)
	if err := e.kube.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "deletion seen", func() bool {
		e.ctrl.mu.Lock()
		defer e.ctrl.mu.Unlock()
		_, ok := e.ctrl.states["uid-1"]
		return !ok
	})
	// A replacement with the same name and address starts None: its entry (left by the
	// previous node until membership reconciles) is restored, since nothing drains it.
	repl := testNode(1)
	repl.UID = "uid-1-replacement"
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, repl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "replacement seen", func() bool {
		e.ctrl.mu.Lock()
		defer e.ctrl.mu.Unlock()
		st, ok := e.ctrl.states["uid-1-replacement"]
		return ok && st.desired == planner.None
	})
	if got := e.poolWrites() - before; got != 0 {
		t.Errorf("%d pool writes after the deletion, want none", got)
	}
	// The periodic resync heals the leftover Down entry of the replacement.
	e.ctrl.resync(ctx)
	e.waitStates()
}

func TestServiceUpdateKeepsDown(t *testing.T) {
	e := newTestEnv(t, 3, Options{})
	e.waitStates()
	e.setTaint(2, outOfService)
	e.waitStates(2)
	// A service reconcile with a changed node set rewrites pool membership; the draining
	// node's entries stay Down (existing entries keep their properties).
	svc := dualStackService("11111111-1111-1111-1111-111111111111", "web", nil)
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, e.nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if st, err := e.states(ctxT(t)); err != nil || len(st["kubernetes/kubernetes"]) != 2 {
		t.Fatalf("node 2 not removed: %v %v", st, err)
	}
	if _, err := e.lb.EnsureLoadBalancer(ctxT(t), testCluster, svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	// The re-added entry of node 2 (public LB) was written Down at once: the membership
	// write runs the controller's pool hook. No resync needed.
	if st, err := e.states(ctxT(t)); err != nil || st["kubernetes/kubernetes"]["10.240.0.12"] != "Down" || st["kubernetes/kubernetes-IPv6"]["fd00::12"] != "Down" {
		t.Fatalf("after the membership rewrite: %v %v", st, err)
	}
	e.waitStates(2)
}

// A multiple-standard-load-balancer cluster: the pools of every configured load balancer are
// updated, including one the services of this test never used.
func TestMultipleStandardLoadBalancers(t *testing.T) {
	e := newTestEnvWith(t, 2, Options{}, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}, {Name: "lb2"}}
	})
	vnet := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/vnet", topology.DefaultSubscriptionID, testRG)
	pool := &armnetwork.BackendAddressPool{Name: to.Ptr(testCluster), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnet)}}}
	for _, n := range e.nodes {
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(n.Name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(n.Status.Addresses[0].Address)}})
	}
	poller, err := e.lbs.BeginCreateOrUpdate(ctxT(t), testRG, "lb2", armnetwork.LoadBalancer{Location: to.Ptr("eastus"),
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{pool}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := poller.PollUntilDone(ctxT(t), &azruntime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Placing the services read lb2 before it existed: drop that cached answer, as its TTL would.
	e.writers.LoadBalancers.For(*created.ID).Invalidate()
	lb2 := func() map[string]string {
		resp, err := e.pools.Get(ctxT(t), testRG, "lb2", testCluster, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, a := range resp.Properties.LoadBalancerBackendAddresses {
			s := ""
			if a.Properties.AdminState != nil {
				s = string(*a.Properties.AdminState)
			}
			out[*a.Properties.IPAddress] = s
		}
		return out
	}
	// Node placement spreads the nodes over the two load balancers: pools hold a
	// subset of the nodes, so only the states of the entries present are checked.
	e.placedNodes = true
	e.setTaint(1, outOfService)
	e.waitStates(1)
	var last map[string]string
	t.Cleanup(func() {
		if t.Failed() {
			st, _ := e.states(context.Background())
			t.Logf("lb2 pool: %v; cluster pools: %v", last, st)
		}
	})
	testutil.WaitFor(t, "node-1 Down on lb2", func() bool { last = lb2(); return last["10.240.0.11"] == "Down" && last["10.240.0.10"] == "" })
	e.setTaint(1)
	e.waitStates()
	testutil.WaitFor(t, "node-1 None on lb2", func() bool { return lb2()["10.240.0.11"] == "None" })
}
