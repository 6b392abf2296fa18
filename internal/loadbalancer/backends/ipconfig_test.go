package backends

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// memNICs is an in-memory NIC store: it records PUTs.
type memNICs struct {
	mu   sync.Mutex
	nics map[string]*armnetwork.Interface
	puts map[string]int
}

type memNIC struct {
	s  *memNICs
	id string
}

func (m memNIC) Get(context.Context) (*armnetwork.Interface, string, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	n, ok := m.s.nics[strings.ToLower(m.id)]
	if !ok {
		return nil, "", nil
	}
	return writer.DeepCopy(n), "etag", nil
}

func (m memNIC) Put(_ context.Context, obj *armnetwork.Interface, _ string) (*armnetwork.Interface, string, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.nics[strings.ToLower(m.id)] = writer.DeepCopy(obj)
	m.s.puts[strings.ToLower(m.id)]++
	return obj, "etag", nil
}

func (m memNIC) Delete(context.Context, string) error { return errors.New("no") }

const unitNICPrefix = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/"

func unitNIC(name string, pools ...string) *armnetwork.Interface {
	var refs []*armnetwork.BackendAddressPool
	for _, p := range pools {
		refs = append(refs, &armnetwork.BackendAddressPool{ID: to.Ptr(p)})
	}
	id := unitNICPrefix + name
	return &armnetwork.Interface{ID: to.Ptr(id), Name: to.Ptr(name), Properties: &armnetwork.InterfacePropertiesFormat{
		IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{ID: to.Ptr(id + "/ipConfigurations/ipconfig1"), Name: to.Ptr("ipconfig1"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Primary: to.Ptr(true), LoadBalancerBackendAddressPools: refs}}}}}
}

func unitLB(members ...string) *armnetwork.LoadBalancer {
	lbID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	var refs []*armnetwork.InterfaceIPConfiguration
	for _, m := range members {
		refs = append(refs, &armnetwork.InterfaceIPConfiguration{ID: to.Ptr(unitNICPrefix + m + "/ipConfigurations/ipconfig1")})
	}
	return &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{{ID: to.Ptr(lbID + "/backendAddressPools/kubernetes"), Name: to.Ptr("kubernetes"),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{BackendIPConfigurations: refs}}}}}
}

func unitBackends(store *memNICs, failing map[string]bool) *ipConfigBackends {
	return &ipConfigBackends{
		filter: membership.NodeFilter{ExcludeControlPlane: true},
		resolve: func(_ context.Context, n *v1.Node) (target, error) {
			if failing[n.Name] {
				return target{}, errors.New("ARM is unavailable")
			}
			nic := unitNICPrefix + n.Name
			return target{vmSet: nodes.VMSet{Kind: nodes.VMSetAvailabilitySet},
				configs: []nodes.IPConfiguration{{ID: nic + "/ipConfigurations/ipconfig1", NICID: nic, Primary: true}}}, nil
		},
		nics: writer.NewRegistry(func(id string) writer.Store[armnetwork.Interface] { return memNIC{store, id} },
			writer.Options[armnetwork.Interface]{}),
		vmssVMs: writer.NewRegistry(func(string) writer.Store[armcompute.VirtualMachineScaleSetVM] { return nil },
			writer.Options[armcompute.VirtualMachineScaleSetVM]{}),
		scaleSets: writer.NewRegistry(func(string) writer.Store[armcompute.VirtualMachineScaleSet] { return nil },
			writer.Options[armcompute.VirtualMachineScaleSet]{}),
	}
}

func unitNodes(names ...string) []*v1.Node {
	var out []*v1.Node
	for _, n := range names {
		out = append(out, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return out
}

func TestIPConfigSyncResolutionFailureRemovesNothing(t *testing.T) {
	pool := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/kubernetes"
	other := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/other/backendAddressPools/other"
	store := &memNICs{puts: map[string]int{}, nics: map[string]*armnetwork.Interface{}}
	for _, n := range []*armnetwork.Interface{unitNIC("a"), unitNIC("b", pool, other), unitNIC("gone", pool)} {
		store.nics[strings.ToLower(*n.ID)] = n
	}
	// "b" cannot be resolved: "a" is added, but neither "b" nor the departed "gone" is removed.
	b := unitBackends(store, map[string]bool{"b": true})
	err := b.Sync(context.Background(), "kubernetes", unitLB("b", "gone"), unitNodes("a", "b"))
	if err == nil || !strings.Contains(err.Error(), "ARM is unavailable") {
		t.Fatalf("want the resolution error, got %v", err)
	}
	if store.puts[strings.ToLower(unitNICPrefix+"a")] != 1 || store.puts[strings.ToLower(unitNICPrefix+"gone")] != 0 ||
		store.puts[strings.ToLower(unitNICPrefix+"b")] != 0 {
		t.Fatalf("puts %v", store.puts)
	}
	// Everything resolves: "gone" leaves, "b" keeps its other pool.
	b = unitBackends(store, nil)
	if err := b.Sync(context.Background(), "kubernetes", unitLB("a", "b", "gone"), unitNodes("a", "b")); err != nil {
		t.Fatal(err)
	}
	if store.puts[strings.ToLower(unitNICPrefix+"gone")] != 1 || store.puts[strings.ToLower(unitNICPrefix+"b")] != 0 {
		t.Fatalf("puts %v", store.puts)
	}
	if refs := store.nics[strings.ToLower(unitNICPrefix+"gone")].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools; len(refs) != 0 {
		t.Fatalf("gone still references %v", *refs[0].ID)
	}
	// A NIC that disappeared meanwhile is not recreated.
	delete(store.nics, strings.ToLower(unitNICPrefix+"a"))
	b = unitBackends(store, nil)
	if err := b.Sync(context.Background(), "kubernetes", unitLB("a", "b"), unitNodes("b")); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.nics[strings.ToLower(unitNICPrefix+"a")]; ok {
		t.Fatal("a deleted NIC was written")
	}
}

func TestIPConfigBackendsPreConfigured(t *testing.T) {
	for _, tc := range []struct {
		pre              string
		public, internal bool
	}{{"", true, true}, {"all", false, false}, {"internal", true, false}, {"external", false, true}} {
		b := &ipConfigBackends{preConfigured: tc.pre}
		pub := b.managed(&armnetwork.LoadBalancer{Name: to.Ptr("kubernetes")})
		in := b.managed(&armnetwork.LoadBalancer{Name: to.Ptr("kubernetes-internal")})
		if pub != tc.public || in != tc.internal {
			t.Errorf("%q: public %v internal %v", tc.pre, pub, in)
		}
	}
}
