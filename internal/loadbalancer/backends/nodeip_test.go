package backends

import (
	"context"
	"hash/maphash"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// memLB is an in-memory load balancer store.
type memLB struct {
	mu  sync.Mutex
	lb  *armnetwork.LoadBalancer
	put int
}

func (s *memLB) Get(context.Context) (*armnetwork.LoadBalancer, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return writer.DeepCopy(s.lb), "1", nil
}

func (s *memLB) Put(_ context.Context, obj *armnetwork.LoadBalancer, _ string) (*armnetwork.LoadBalancer, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lb, s.put = writer.DeepCopy(obj), s.put+1
	return writer.DeepCopy(obj), "2", nil
}

func (s *memLB) Delete(context.Context, string) error { return nil }

func addrs(lb *armnetwork.LoadBalancer, pool string) []string {
	var out []string
	if p := FindPool(lb, pool); p != nil && p.Properties != nil {
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			out = append(out, *a.Properties.IPAddress)
		}
	}
	return out
}

// During a move to IP-based membership node changes go to the staging pool the rules use; a
// pool still NIC-based gets no address (Azure would refuse it) and the sync says why.
func TestNodeIPSyncDuringPoolMigration(t *testing.T) {
	const lbID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.4"}}}}
	for _, tc := range []struct {
		name     string
		pools    []*armnetwork.BackendAddressPool
		wantPool string
		err      string
	}{
		{name: "IP-based pool", pools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}}, wantPool: "kubernetes"},
		{name: "staged: the staging pool follows the nodes", pools: []*armnetwork.BackendAddressPool{
			{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
				BackendIPConfigurations: []*armnetwork.InterfaceIPConfiguration{{ID: to.Ptr("nic-ipc")}}}},
			{Name: to.Ptr("kubernetes_ip-migration")}}, wantPool: "kubernetes_ip-migration"},
		{name: "still NIC-based", pools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			BackendIPConfigurations: []*armnetwork.InterfaceIPConfiguration{{ID: to.Ptr("nic-ipc")}}}}}, err: "still NIC-based"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: tc.pools}}
			st := &memLB{lb: writer.DeepCopy(lb)}
			b := &NodeIP{lbs: writer.NewRegistry(func(string) writer.Store[armnetwork.LoadBalancer] { return st }, writer.Options[armnetwork.LoadBalancer]{})}
			err := b.Sync(context.Background(), "kubernetes", lb, []*v1.Node{node})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || st.put != 0 {
					t.Fatalf("err %v, %d writes; want %q and none", err, st.put, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"kubernetes", "kubernetes_ip-migration"} {
				got := addrs(st.lb, p)
				if want := p == tc.wantPool; (len(got) == 1 && got[0] == "10.0.0.4") != want {
					t.Errorf("pool %s holds %v", p, got)
				}
			}
		})
	}
}

// The pool entries hook (the admin state of draining nodes) runs on a pool whose addresses
// change, and not on one that already holds them: in a burst every service's sync writes the
// same pool, and the hook is a pass over every node.
func TestNodeIPEntriesHookOnlyOnChange(t *testing.T) {
	const lbID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	node := func(name, ip string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	}
	lb := &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}}}}
	st := &memLB{lb: writer.DeepCopy(lb)}
	hooks := 0
	b := &NodeIP{lbs: writer.NewRegistry(func(string) writer.Store[armnetwork.LoadBalancer] { return st }, writer.Options[armnetwork.LoadBalancer]{}),
		entries: func(*armnetwork.BackendAddressPool) { hooks++ }}
	for i, step := range []struct {
		nodes []*v1.Node
		hooks int
	}{
		{[]*v1.Node{node("n0", "10.0.0.4")}, 1},                         // added
		{[]*v1.Node{node("n0", "10.0.0.4")}, 1},                         // unchanged
		{[]*v1.Node{node("n0", "10.0.0.4"), node("n1", "10.0.0.5")}, 2}, // added
		{[]*v1.Node{node("n1", "10.0.0.5")}, 3},                         // removed
		{[]*v1.Node{node("n1", "10.0.0.5")}, 3},                         // unchanged
	} {
		if err := b.Sync(context.Background(), "kubernetes", st.lb, step.nodes); err != nil {
			t.Fatal(err)
		}
		if hooks != step.hooks {
			t.Fatalf("step %d: hook ran %d times in all, want %d", i, hooks, step.hooks)
		}
	}
	if st.put != 3 {
		t.Errorf("%d writes, want 3 (one per change)", st.put)
	}
}

// The pool entries of a node list are computed once and shared by the reconciles that pass the
// same nodes (by name and resource version); a node's new resource version is a new list.
func TestNodeIPEntriesRememberedPerNodeList(t *testing.T) {
	const lbID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	node := func(name, rv, ip string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	}
	lb := &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}}}}
	st := &memLB{lb: writer.DeepCopy(lb)}
	b := &NodeIP{lbs: writer.NewRegistry(func(string) writer.Store[armnetwork.LoadBalancer] { return st }, writer.Options[armnetwork.LoadBalancer]{}),
		last: &nodeIPMemo{seed: maphash.MakeSeed()}}
	n0 := node("n0", "1", "10.0.0.4")
	sync := func(nodes ...*v1.Node) []string {
		t.Helper()
		if err := b.Sync(context.Background(), "kubernetes", st.lb, nodes); err != nil {
			t.Fatal(err)
		}
		return addrs(st.lb, "kubernetes")
	}
	if got := sync(n0); len(got) != 1 || got[0] != "10.0.0.4" {
		t.Fatalf("pool %v", got)
	}
	first := b.last.entries[naming.IPv4]
	// Informer objects are never modified in place; one that is (same resource version) shows
	// that the list was not mapped again.
	n0.Status.Addresses[0].Address = "10.0.0.9"
	if got := sync(n0); len(got) != 1 || got[0] != "10.0.0.4" {
		t.Fatalf("pool %v: the same node list must be served from memory", got)
	}
	if reflect.ValueOf(b.last.entries[naming.IPv4]).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
		t.Fatal("the entries of the same node list were computed again")
	}
	if got := sync(node("n0", "2", "10.0.0.9")); len(got) != 1 || got[0] != "10.0.0.9" {
		t.Fatalf("pool %v: a new resource version must be mapped again", got)
	}
	// A node without a resource version (built by hand) is never remembered.
	if got := sync(node("n0", "", "10.0.0.7")); len(got) != 1 || got[0] != "10.0.0.7" {
		t.Fatalf("pool %v", got)
	}
	if got := sync(node("n0", "", "10.0.0.8")); len(got) != 1 || got[0] != "10.0.0.8" {
		t.Fatalf("pool %v: a list without resource versions must be mapped afresh", got)
	}
}
