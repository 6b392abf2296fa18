package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

const ipamClusterCIDR = "10.244.0.0/16" // 256 node subnets of /24

// ipamCCMFlags run the node-ipam and route controllers only.
var ipamCCMFlags = []string{"--controllers=node-ipam,route", "--allocate-node-cidrs=true", "--configure-cloud-routes=true",
	"--cluster-cidr=" + ipamClusterCIDR, "--node-cidr-mask-size=24", "--route-reconciliation-period=2s"}

// ipamState is every node's pod CIDR. It fails (as a permanent error) on a CIDR held by two
// nodes or outside the cluster CIDR.
func ipamState(ctx context.Context, e *framework.Env) (map[string]string, error) {
	list, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	cluster := netip.MustParsePrefix(ipamClusterCIDR)
	out := map[string]string{}
	holder := map[string]string{}
	for _, n := range list.Items {
		if len(n.Spec.PodCIDRs) == 0 {
			continue
		}
		c := n.Spec.PodCIDRs[0]
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Bits() != 24 || !cluster.Contains(p.Addr()) || len(n.Spec.PodCIDRs) != 1 {
			return nil, fmt.Errorf("node %s has pod CIDRs %v: want one /24 of %s", n.Name, n.Spec.PodCIDRs, ipamClusterCIDR)
		}
		if h, dup := holder[c]; dup {
			return nil, fmt.Errorf("pod CIDR %s held by %s and %s", c, h, n.Name)
		}
		holder[c] = n.Name
		out[n.Name] = c
	}
	return out, nil
}

// ipamRoutes is the route table: route name → address prefix.
func ipamRoutes(ctx context.Context, e *framework.Env) (map[string]string, error) {
	a := e.Azure
	rt, err := e.Azsim.Get(ctx, "/subscriptions/"+a.SubscriptionID+"/resourceGroups/"+a.ResourceGroup+"/providers/Microsoft.Network/routeTables/"+a.RouteTableName)
	if err != nil {
		return nil, err
	}
	props, _ := rt["properties"].(map[string]any)
	list, _ := props["routes"].([]any)
	out := map[string]string{}
	for _, r := range list {
		m, _ := r.(map[string]any)
		p, _ := m["properties"].(map[string]any)
		out[fmt.Sprint(m["name"])] = fmt.Sprint(p["addressPrefix"])
	}
	return out, nil
}

// ipamSettled holds when exactly the named nodes have distinct pod CIDRs and the route table
// has one route per node with its CIDR, and nothing else. It stores the CIDRs in got.
func ipamSettled(e *framework.Env, names []string, got map[string]string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		state, err := ipamState(ctx, e)
		if err != nil {
			return false, err
		}
		for _, n := range names {
			if state[n] == "" {
				return false, fmt.Errorf("node %s has no pod CIDR yet (%d of %d have one)", n, len(state), len(names))
			}
		}
		if len(state) != len(names) {
			return false, fmt.Errorf("%d nodes have pod CIDRs, want %d", len(state), len(names))
		}
		rs, err := ipamRoutes(ctx, e)
		if err != nil {
			return false, err
		}
		for _, n := range names {
			name := azurenames.RouteName(n, state[n])
			if rs[name] != state[n] {
				return false, fmt.Errorf("route %s is %q, want %s (%d routes)", name, rs[name], state[n], len(rs))
			}
		}
		if len(rs) != len(names) {
			return false, fmt.Errorf("%d routes for %d nodes", len(rs), len(names))
		}
		clear(got)
		for k, v := range state {
			got[k] = v
		}
		return true, nil
	}
}

func ipamEvent(ctx context.Context, e *framework.Env, node, reason string) (bool, error) {
	evs, err := e.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
	if err != nil {
		return false, err
	}
	if len(evs.Items) == 0 {
		return false, fmt.Errorf("no %s event on node %s", reason, node)
	}
	return true, nil
}

func ipamDelete(t *testing.T, e *framework.Env, names []string) {
	t.Helper()
	for _, n := range names {
		if err := e.Kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func machineNames(ms []framework.Machine) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.NodeName
	}
	return out
}

func without(names []string, gone []string) []string {
	drop := map[string]bool{}
	for _, g := range gone {
		drop[g] = true
	}
	var out []string
	for _, n := range names {
		if !drop[n] {
			out = append(out, n)
		}
	}
	return out
}

// TestNodeIPAM: 200 KWOK nodes each get a distinct /24 of 10.244.0.0/16 and a route in the route
// table; the range is then filled (256 nodes) and one more node waits; deleted nodes' CIDRs go to
// new nodes (reused, never duplicated) and their routes follow; nodes deleted and added while the
// CCM is down get exactly the freed CIDRs after it restarts (the used set is rebuilt first).
func TestNodeIPAM(t *testing.T) {
	working(t)
	ccm := nodesRequireBinary(t, framework.CCMBinaryName)
	const initial, capacity = 200, 256
	topo := framework.DefaultTopology()
	topo.ScaleSets[0].Capacity = capacity + 1 + 20 + 10
	e := framework.Start(t, framework.Options{Topology: topo, CCMBinary: ccm})
	ms := e.Machines
	sort.Slice(ms, func(i, j int) bool { return ms[i].NodeName < ms[j].NodeName })
	kubelet := framework.NodeOptions{ProviderID: true, Initialized: true}
	e.StartCCM(ipamCCMFlags...)

	got := map[string]string{}
	live := machineNames(ms[:initial])
	t.Run("200 nodes: distinct pod CIDRs and a route each", func(t *testing.T) {
		began := time.Now()
		e.CreateNodes(kubelet, ms[:initial]...)
		e.WaitFor("200 nodes with CIDRs and routes", ipamSettled(e, live, got), 5*time.Minute)
		t.Logf("200 nodes created, assigned and routed in %s", time.Since(began).Round(time.Second))
	})

	overflow := ms[capacity].NodeName
	t.Run("range full: the next node waits with an event", func(t *testing.T) {
		e.CreateNodes(kubelet, ms[initial:capacity]...)
		live = machineNames(ms[:capacity])
		e.WaitFor("256 nodes with CIDRs and routes", ipamSettled(e, live, got), 5*time.Minute)
		e.CreateNodes(kubelet, ms[capacity])
		e.WaitFor("CIDRNotAvailable on "+overflow, func(ctx context.Context) (bool, error) {
			return ipamEvent(ctx, e, overflow, "CIDRNotAvailable")
		}, time.Minute)
		n, err := nodesGet(context.Background(), e, overflow)
		if err != nil || len(n.Spec.PodCIDRs) != 0 {
			t.Fatalf("overflow node: %v %v", n.Spec.PodCIDRs, err)
		}
	})

	t.Run("deleted nodes' CIDRs are reused by new nodes, routes follow", func(t *testing.T) {
		gone := live[10:31] // 21 nodes
		freed := map[string]bool{}
		for _, n := range gone {
			freed[got[n]] = true
		}
		ipamDelete(t, e, gone)
		fresh := ms[capacity+1 : capacity+21]
		e.CreateNodes(kubelet, fresh...)
		newcomers := append([]string{overflow}, machineNames(fresh)...)
		live = append(without(live, gone), newcomers...)
		e.WaitFor("freed CIDRs reassigned and routed", ipamSettled(e, live, got), 3*time.Minute)
		for _, n := range newcomers {
			if !freed[got[n]] {
				t.Errorf("%s got %s, not one of the 21 freed CIDRs", n, got[n])
			}
		}
	})

	t.Run("across a CCM restart: nodes deleted and added while it is down", func(t *testing.T) {
		if err := e.StopCCM(); err != nil {
			t.Fatal(err)
		}
		gone := live[40:50]
		freed := map[string]bool{}
		for _, n := range gone {
			freed[got[n]] = true
		}
		ipamDelete(t, e, gone)
		fresh := ms[capacity+21 : capacity+31]
		e.CreateNodes(kubelet, fresh...)
		live = append(without(live, gone), machineNames(fresh)...)
		e.StartCCM(ipamCCMFlags...)
		e.WaitFor("CIDRs after the restart", ipamSettled(e, live, got), 3*time.Minute)
		for _, n := range machineNames(fresh) {
			if !freed[got[n]] {
				t.Errorf("%s got %s after the restart, not one of the 10 freed CIDRs", n, got[n])
			}
		}
	})
}

// TestNodeManagerARMModeWaitRoutes: the node manager, reading ARM (--use-instance-metadata=false
// --cloud-config), initialises a node from its VM; with --wait-routes the node is
// NetworkUnavailable from then on until its route is in the route table: a monitor reading the
// node, then the route table, never sees it available without the route.
func TestNodeManagerARMModeWaitRoutes(t *testing.T) {
	working(t)
	ccm := nodesRequireBinary(t, framework.CCMBinaryName)
	nodeManager := nodesRequireBinary(t, "azure-cloud-node-manager")
	e := framework.Start(t, framework.Options{CCMBinary: ccm})
	m := e.Machines[0]
	// No providerID, uninitialized taint: a kubelet's registration, already Ready as a kubelet
	// posts it. kwok plays the kubelet: a node that is not Ready gets kwok's initial conditions,
	// which include NetworkUnavailable False/RouteCreated (set in a real cluster only by the
	// route controller) and would race the condition the node manager sets and this test watches.
	reg := framework.NewNode(m, framework.NodeOptions{})
	reg.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := e.Kube.CoreV1().Nodes().Create(context.Background(), reg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Azure.Server.Middleware().ResetStats()
	p, err := framework.StartProcess(framework.ProcessSpec{Name: "node-manager", Path: nodeManager,
		Args: []string{"--kubeconfig=" + e.Kubeconfig, "--node-name=" + m.NodeName, "--use-instance-metadata=false",
			"--cloud-config=" + e.CloudConfigPath, "--wait-routes", "--node-status-update-frequency=2s", "--v=2"},
		Env:     []string{"SSL_CERT_FILE=" + e.Azure.CAFile},
		LogPath: filepath.Join(e.Dir, "logs", "node-manager.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })

	e.WaitFor("node manager initialised "+m.NodeName+" from ARM", nodesInitialized(e, m), 2*time.Minute)
	var armReads int64
	for _, c := range e.Azure.Server.Middleware().Stats().Requests {
		if c.Method == "GET" && strings.Contains(c.ResourceType, "virtualMachineScaleSets") {
			armReads += c.Count
		}
	}
	if armReads == 0 {
		t.Fatal("the node manager initialised the node without reading the scale set from ARM")
	}
	n, err := nodesGet(context.Background(), e, m.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	if c := nodeCondition(n, corev1.NodeNetworkUnavailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "NodeInitialization" {
		t.Fatalf("after initialisation NetworkUnavailable is %+v, want True/NodeInitialization", c)
	}

	// From now on: whenever the node is available, its route must be in the route table.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var violation string
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n, err := nodesGet(ctx, e, m.NodeName)
			if err == nil {
				c := nodeCondition(n, corev1.NodeNetworkUnavailable)
				if c == nil || c.Status != corev1.ConditionTrue {
					rs, rerr := ipamRoutes(ctx, e)
					cidr := ""
					if len(n.Spec.PodCIDRs) > 0 {
						cidr = n.Spec.PodCIDRs[0]
					}
					if rerr == nil && (cidr == "" || rs[azurenames.RouteName(m.NodeName, cidr)] != cidr) {
						mu.Lock()
						violation = fmt.Sprintf("NetworkUnavailable %+v with pod CIDR %q and no route (routes %v)", c, cidr, rs)
						mu.Unlock()
					}
				}
				mu.Lock()
				samples++
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// The node manager keeps re-syncing (every 2s) without touching the condition: wait for a
	// few of its passes to have happened before the CCM may create the route.
	e.WaitFor("monitor samples before the CCM starts", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if samples < 30 {
			return false, fmt.Errorf("%d samples", samples)
		}
		return violation == "", fmt.Errorf("%s", violation)
	}, time.Minute)

	e.StartCCM(ipamCCMFlags...)
	e.WaitFor("route created and NetworkUnavailable False", func(ctx context.Context) (bool, error) {
		n, err := nodesGet(ctx, e, m.NodeName)
		if err != nil {
			return false, err
		}
		c := nodeCondition(n, corev1.NodeNetworkUnavailable)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "RouteCreated" {
			return false, fmt.Errorf("NetworkUnavailable %+v, pod CIDRs %v", c, n.Spec.PodCIDRs)
		}
		return true, nil
	}, 2*time.Minute)
	stop()
	<-done
	if violation != "" {
		t.Fatalf("node available without its route: %s", violation)
	}
	t.Logf("monitor took %d samples; the node was never available without its route", samples)
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
