package backends

import (
	"context"
	"hash/maphash"
	"reflect"
	"slices"
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

// The pool entries are computed once for the names and addresses of the eligible nodes and
// shared by the reconciles that pass them, whatever else changed on the nodes (a status
// heartbeat gives a node a new resource version); a changed address is computed again.
func TestNodeIPEntriesRememberedByAddresses(t *testing.T) {
	const lbID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	node := func(name, rv, ip string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: name}}}}
	}
	lb := &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}}}}
	st := &memLB{lb: writer.DeepCopy(lb)}
	b := &NodeIP{lbs: writer.NewRegistry(func(string) writer.Store[armnetwork.LoadBalancer] { return st }, writer.Options[armnetwork.LoadBalancer]{}),
		last: &nodeIPMemo{seed: maphash.MakeSeed()}}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	var prev map[string]string
	for i, step := range []struct {
		nodes  []*v1.Node
		want   []string
		shared bool // the entries of the step before are reused
	}{
		{[]*v1.Node{node("n0", "1", "10.0.0.4"), node("n1", "1", "10.0.0.5")}, []string{"10.0.0.4", "10.0.0.5"}, false},
		{[]*v1.Node{node("n0", "2", "10.0.0.4"), node("n1", "7", "10.0.0.5")}, []string{"10.0.0.4", "10.0.0.5"}, true},  // heartbeats
		{[]*v1.Node{node("n1", "7", "10.0.0.5"), node("n0", "2", "10.0.0.4")}, []string{"10.0.0.4", "10.0.0.5"}, true},  // another order
		{[]*v1.Node{node("n0", "3", "10.0.0.9"), node("n1", "7", "10.0.0.5")}, []string{"10.0.0.5", "10.0.0.9"}, false}, // address changed
		{[]*v1.Node{node("n0", "3", "10.0.0.9")}, []string{"10.0.0.9"}, false},                                          // node left
		{[]*v1.Node{node("n2", "1", "10.0.0.9")}, []string{"10.0.0.9"}, false},                                          // another node, same address
	} {
		if err := b.Sync(context.Background(), "kubernetes", st.lb, step.nodes); err != nil {
			t.Fatal(err)
		}
		got := addrs(st.lb, "kubernetes")
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Fatalf("step %d: pool %v, want %v", i, got, step.want)
		}
		cur := b.last.entries[naming.IPv4]
		if i > 0 && same(prev, cur) != step.shared {
			t.Fatalf("step %d: entries reused %v, want %v", i, same(prev, cur), step.shared)
		}
		if step.nodes[0].Name == "n2" && cur["10.0.0.9"] != "n2" {
			t.Fatalf("step %d: entries %v: the entry is named after its node", i, cur)
		}
		prev = cur
	}
}
