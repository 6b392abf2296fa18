package writer

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// bigLoadBalancer is a load balancer as a 5,000-node cluster has it: a nodeIP pool of every node
// and a few hundred rules and probes.
func bigLoadBalancer(nodes, rules int) *armnetwork.LoadBalancer {
	lb := &armnetwork.LoadBalancer{ID: to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"),
		Name: to.Ptr("kubernetes"), Location: to.Ptr("eastus"), Etag: to.Ptr(`W/"1"`), Tags: map[string]*string{"k": to.Ptr("v")},
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
	pool := &armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for i := range nodes {
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(fmt.Sprintf("node-%05d", i)),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(fmt.Sprintf("10.1.%d.%d", i/250, i%250+4)),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet")},
				AdminState:     to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone)}})
	}
	lb.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{pool}
	for i := range rules {
		name := fmt.Sprintf("a%032d-TCP-%d", i, 1000+i)
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			Name: to.Ptr(fmt.Sprintf("a%032d", i)), Zones: []*string{to.Ptr("1"), to.Ptr("2")},
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr("pip")}}})
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr(name),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr(int32(1000 + i)),
				BackendPort: to.Ptr(int32(1000 + i)), EnableFloatingIP: to.Ptr(true), IdleTimeoutInMinutes: to.Ptr(int32(4)),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr("f")}, BackendAddressPool: &armnetwork.SubResource{ID: to.Ptr("p")}}})
		lb.Properties.Probes = append(lb.Properties.Probes, &armnetwork.Probe{Name: to.Ptr(name),
			Properties: &armnetwork.ProbePropertiesFormat{Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr(int32(30000 + i))}})
	}
	return lb
}

func TestDeepCopyMatchesJSONRoundTrip(t *testing.T) {
	lb := bigLoadBalancer(50, 10)
	cp := DeepCopy(lb)
	if !reflect.DeepEqual(cp, lb) {
		t.Fatal("copy differs from the original")
	}
	a, _ := json.Marshal(lb)
	b, _ := json.Marshal(cp)
	if string(a) != string(b) {
		t.Fatalf("copy encodes differently:\n%s\n%s", a, b)
	}
	// Nothing is shared: editing the copy leaves the original alone.
	*cp.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[3].Properties.IPAddress = "1.2.3.4"
	*cp.Tags["k"] = "changed"
	cp.Properties.Probes[0].Properties.Port = to.Ptr(int32(1))
	cp.Properties.LoadBalancingRules = cp.Properties.LoadBalancingRules[:1]
	if got := *lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[3].Properties.IPAddress; got == "1.2.3.4" {
		t.Error("pool address shared")
	}
	if *lb.Tags["k"] != "v" || *lb.Properties.Probes[0].Properties.Port == 1 || len(lb.Properties.LoadBalancingRules) != 10 {
		t.Error("the original changed with the copy")
	}
}

func TestDeepEqualAgreesWithReflect(t *testing.T) {
	base := bigLoadBalancer(20, 5)
	type variant struct {
		name string
		edit func(*armnetwork.LoadBalancer)
	}
	for _, v := range []variant{
		{"same", func(*armnetwork.LoadBalancer) {}},
		{"address changed", func(lb *armnetwork.LoadBalancer) {
			*lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[7].Properties.IPAddress = "10.9.9.9"
		}},
		{"address removed", func(lb *armnetwork.LoadBalancer) {
			p := lb.Properties.BackendAddressPools[0].Properties
			p.LoadBalancerBackendAddresses = p.LoadBalancerBackendAddresses[1:]
		}},
		{"nil vs empty slice", func(lb *armnetwork.LoadBalancer) { lb.Properties.OutboundRules = []*armnetwork.OutboundRule{} }},
		{"pointer set", func(lb *armnetwork.LoadBalancer) {
			lb.Properties.Probes[0].Properties.IntervalInSeconds = to.Ptr(int32(5))
		}},
		{"tag value", func(lb *armnetwork.LoadBalancer) { lb.Tags["k"] = to.Ptr("w") }},
		{"tag added", func(lb *armnetwork.LoadBalancer) { lb.Tags["k2"] = to.Ptr("v") }},
		{"nil map", func(lb *armnetwork.LoadBalancer) { lb.Tags = nil }},
		{"enum", func(lb *armnetwork.LoadBalancer) { lb.SKU.Name = to.Ptr(armnetwork.LoadBalancerSKUNameBasic) }},
	} {
		t.Run(v.name, func(t *testing.T) {
			other := DeepCopy(base)
			v.edit(other)
			if got, want := DeepEqual(base, other), reflect.DeepEqual(base, other); got != want {
				t.Errorf("DeepEqual %v, reflect.DeepEqual %v", got, want)
			}
		})
	}
	if !DeepEqual[armnetwork.LoadBalancer](nil, nil) || DeepEqual(base, nil) {
		t.Error("nil handling")
	}
}

func TestDeepCopyKeepsNilAndEmptyApart(t *testing.T) {
	type inner struct {
		S []string
		M map[string]any
		P *int
		I any
		T *time.Time
	}
	v := &struct {
		Nil, Empty inner
		Arr        [2]*int
	}{Empty: inner{S: []string{}, M: map[string]any{"x": []any{1, "y", map[string]any{"z": 2}}}, P: to.Ptr(0), I: &inner{S: []string{"a"}}, T: to.Ptr(time.Date(2026, 11, 23, 1, 2, 3, 4, time.UTC))}, Arr: [2]*int{to.Ptr(7)}}
	cp := DeepCopy(v)
	if !reflect.DeepEqual(cp, v) {
		t.Fatalf("got %+v want %+v", cp, v)
	}
	if cp.Nil.S != nil || cp.Nil.M != nil || cp.Nil.P != nil || cp.Nil.I != nil || cp.Empty.S == nil {
		t.Errorf("nil and empty mixed up: %+v", cp)
	}
	if cp.Arr[0] == v.Arr[0] || cp.Empty.I.(*inner) == v.Empty.I.(*inner) || cp.Empty.T == v.Empty.T || !cp.Empty.T.Equal(*v.Empty.T) {
		t.Error("pointer shared")
	}
	if DeepCopy[inner](nil) != nil {
		t.Error("nil copy is not nil")
	}
}

// BenchmarkClone compares the writers' copy of a 5,000-node load balancer with the JSON round
// trip it replaced.
func BenchmarkClone(b *testing.B) {
	lb := bigLoadBalancer(5000, 500)
	b.Run("deepcopy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			DeepCopy(lb)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonClone(lb)
		}
	})
	b.Run("equal", func(b *testing.B) {
		cp := DeepCopy(lb)
		b.ReportAllocs()
		for b.Loop() {
			DeepEqual(lb, cp)
		}
	})
	b.Run("equal-reflect", func(b *testing.B) {
		cp := DeepCopy(lb)
		b.ReportAllocs()
		for b.Loop() {
			reflect.DeepEqual(lb, cp)
		}
	})
	b.Run("equal-json", func(b *testing.B) {
		cp := DeepCopy(lb)
		for b.Loop() {
			jsonEqual(lb, cp)
		}
	})
}

// jsonClone and jsonEqual are what the writers used before DeepCopy (the benchmark's reference).
func jsonClone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("writer: cannot clone %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("writer: cannot clone %T: %v", v, err))
	}
	return out
}

func jsonEqual[T any](a, b *T) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return reflect.DeepEqual(a, b)
	}
	return string(ja) == string(jb)
}
