package planner

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints}}
}

func TestDesired(t *testing.T) {
	for name, tc := range map[string]struct {
		taints []v1.Taint
		want   State
	}{
		"no taint":                          {nil, None},
		"out-of-service NoExecute":          {[]v1.Taint{{Key: TaintOutOfService, Effect: v1.TaintEffectNoExecute}}, Down},
		"out-of-service NoSchedule":         {[]v1.Taint{{Key: TaintOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoSchedule}}, Down},
		"spot eviction NoSchedule":          {[]v1.Taint{{Key: TaintDraining, Value: TaintDrainingSpotEviction, Effect: v1.TaintEffectNoSchedule}}, Down},
		"spot eviction PreferNoSchedule":    {[]v1.Taint{{Key: TaintDraining, Value: TaintDrainingSpotEviction, Effect: v1.TaintEffectPreferNoSchedule}}, Down},
		"draining with another value":       {[]v1.Taint{{Key: TaintDraining, Value: "other", Effect: v1.TaintEffectNoSchedule}}, None},
		"cordon alone":                      {[]v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}, None},
		"shutdown alone":                    {[]v1.Taint{{Key: "node.cloudprovider.kubernetes.io/shutdown", Effect: v1.TaintEffectNoSchedule}}, None},
		"not ready alone":                   {[]v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}}, None},
		"cordon plus out-of-service":        {[]v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}, {Key: TaintOutOfService, Effect: v1.TaintEffectNoExecute}}, Down},
		"both draining taints":              {[]v1.Taint{{Key: TaintDraining, Value: TaintDrainingSpotEviction}, {Key: TaintOutOfService}}, Down},
		"out-of-service key case different": {[]v1.Taint{{Key: "Node.kubernetes.io/out-of-service"}}, None},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Desired(node("n", tc.taints...)); got != tc.want {
				t.Errorf("Desired = %s, want %s", got, tc.want)
			}
		})
	}
	if Desired(nil) != None {
		t.Error("nil node must be None")
	}
}

func TestDrainingTaintsAndSpot(t *testing.T) {
	n := node("n", v1.Taint{Key: TaintOutOfService, Effect: v1.TaintEffectNoExecute}, v1.Taint{Key: TaintOutOfService, Effect: v1.TaintEffectNoSchedule},
		v1.Taint{Key: TaintDraining, Value: TaintDrainingSpotEviction})
	if got, want := DrainingTaints(n), []string{TaintDraining, TaintOutOfService}; !reflect.DeepEqual(got, want) {
		t.Errorf("DrainingTaints = %v, want %v", got, want)
	}
	if !HasSpotTaint(n) || HasSpotTaint(node("m", v1.Taint{Key: TaintDraining, Value: "x"})) {
		t.Error("HasSpotTaint")
	}
}

func TestMemberOf(t *testing.T) {
	n := node("n1")
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "n1"}, {Type: v1.NodeInternalIP, Address: "10.0.0.4"},
		{Type: v1.NodeInternalIP, Address: "fd00::4"}, {Type: v1.NodeExternalIP, Address: "203.0.113.9"}, {Type: v1.NodeInternalIP, Address: "bogus"}}
	m := MemberOf(n, []string{"cfg"})
	want := Member{Node: "n1", State: None, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.4"), netip.MustParseAddr("fd00::4")}, IPConfigIDs: []string{"cfg"}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("MemberOf = %+v, want %+v", m, want)
	}
}

const (
	cfgA = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool0/virtualMachines/0/networkInterfaces/pool0/ipConfigurations/ipconfig1"
	cfgB = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/vm-b-nic/ipConfigurations/ipconfig1"
)

func ipEntry(name, ip string, st *armnetwork.LoadBalancerBackendAddressAdminState) *armnetwork.LoadBalancerBackendAddress {
	return &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
		IPAddress: to.Ptr(ip), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr("vnet")}, AdminState: st}}
}

func nicEntry(name, cfg string, st *armnetwork.LoadBalancerBackendAddressAdminState) *armnetwork.LoadBalancerBackendAddress {
	return &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
		NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(cfg)}, AdminState: st}}
}

var (
	down = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)
	none = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone)
	up   = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateUp)
)

func ipPool(entries ...*armnetwork.LoadBalancerBackendAddress) *armnetwork.BackendAddressPool {
	return &armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr("vnet")}, LoadBalancerBackendAddresses: entries}}
}

func nicPool(configs []string, entries ...*armnetwork.LoadBalancerBackendAddress) *armnetwork.BackendAddressPool {
	p := &armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: entries}}
	for _, c := range configs {
		p.Properties.BackendIPConfigurations = append(p.Properties.BackendIPConfigurations, &armnetwork.InterfaceIPConfiguration{ID: to.Ptr(c)})
	}
	return p
}

func member(name string, st State, ips ...string) Member {
	m := Member{Node: name, State: st}
	for _, ip := range ips {
		m.IPs = append(m.IPs, netip.MustParseAddr(ip))
	}
	return m
}

func states(p *armnetwork.BackendAddressPool) map[string]string {
	out := map[string]string{}
	for _, e := range p.Properties.LoadBalancerBackendAddresses {
		s := "<nil>"
		if e.Properties.AdminState != nil {
			s = string(*e.Properties.AdminState)
		}
		out[*e.Name] = s
	}
	return out
}

func TestApply(t *testing.T) {
	for name, tc := range map[string]struct {
		pool    *armnetwork.BackendAddressPool
		members []Member
		want    map[string]string
		changes []Change
	}{
		"IP pool: draining node down, others untouched": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", nil), ipEntry("n2", "10.0.0.5", nil), ipEntry("n3", "10.0.0.6", nil)),
			members: []Member{member("n1", Down, "10.0.0.4"), member("n2", None, "10.0.0.5")},
			want:    map[string]string{"n1": "Down", "n2": "<nil>", "n3": "<nil>"},
			changes: []Change{{Node: "n1", Entry: "n1", From: None, To: Down}},
		},
		"IP pool: already down is no change": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", down)),
			members: []Member{member("n1", Down, "10.0.0.4")},
			want:    map[string]string{"n1": "Down"},
		},
		"IP pool: restore writes explicit None": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", down), ipEntry("n2", "10.0.0.5", down)),
			members: []Member{member("n1", None, "10.0.0.4"), member("n2", Down, "10.0.0.5")},
			want:    map[string]string{"n1": "None", "n2": "Down"},
			changes: []Change{{Node: "n1", Entry: "n1", From: Down, To: None}},
		},
		"IP pool: None over nil or None is no change": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", nil), ipEntry("n2", "10.0.0.5", none)),
			members: []Member{member("n1", None, "10.0.0.4"), member("n2", None, "10.0.0.5")},
			want:    map[string]string{"n1": "<nil>", "n2": "None"},
		},
		"IP pool: a hand-set Up stays while not draining, Down wins while draining": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", up), ipEntry("n2", "10.0.0.5", up)),
			members: []Member{member("n1", None, "10.0.0.4"), member("n2", Down, "10.0.0.5")},
			want:    map[string]string{"n1": "Up", "n2": "Down"},
			changes: []Change{{Node: "n2", Entry: "n2", From: "Up", To: Down}},
		},
		"IP pool: every address of a multi-address node, IPv4-mapped and IPv6": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", nil), ipEntry("n1-1", "10.0.0.14", nil), ipEntry("n1-v6", "fd00::4", nil)),
			members: []Member{member("n1", Down, "::ffff:10.0.0.4", "10.0.0.14", "fd00::4")},
			want:    map[string]string{"n1": "Down", "n1-1": "Down", "n1-v6": "Down"},
			changes: []Change{{"n1", "n1", None, Down}, {"n1", "n1-1", None, Down}, {"n1", "n1-v6", None, Down}},
		},
		"IP pool: unknown and deleted nodes are left alone": {
			pool:    ipPool(ipEntry("gone", "10.0.0.9", down), ipEntry("n1", "10.0.0.4", nil)),
			members: []Member{member("n1", None, "10.0.0.4")},
			want:    map[string]string{"gone": "Down", "n1": "<nil>"},
		},
		"IP pool: same name, new address (replacement node) does not match the old entry": {
			pool:    ipPool(ipEntry("n1", "10.0.0.4", down)),
			members: []Member{member("n1", None, "10.0.0.40")},
			want:    map[string]string{"n1": "Down"},
		},
		"NIC pool: listed entry matched by IP configuration (case-insensitive)": {
			pool:    nicPool([]string{cfgA, cfgB}, nicEntry("a", cfgA, nil), nicEntry("b", cfgB, nil)),
			members: []Member{{Node: "na", State: Down, IPConfigIDs: []string{lower(cfgA)}}, {Node: "nb", State: None, IPConfigIDs: []string{cfgB}}},
			want:    map[string]string{"a": "Down", "b": "<nil>"},
			changes: []Change{{Node: "na", Entry: "a", From: None, To: Down}},
		},
		"NIC pool: unlisted member gets an entry when Down only": {
			pool:    nicPool([]string{cfgA, cfgB}),
			members: []Member{{Node: "na", State: Down, IPConfigIDs: []string{cfgA}}, {Node: "nb", State: None, IPConfigIDs: []string{cfgB}}},
			want:    map[string]string{"pool0-0-ipconfig1": "Down"},
			changes: []Change{{Node: "na", Entry: "pool0-0-ipconfig1", To: Down}},
		},
		"NIC pool: restore on an added entry": {
			pool:    nicPool([]string{cfgB}, nicEntry("vm-b-nic-ipconfig1", cfgB, down)),
			members: []Member{{Node: "nb", State: None, IPConfigIDs: []string{cfgB}}},
			want:    map[string]string{"vm-b-nic-ipconfig1": "None"},
			changes: []Change{{Node: "nb", Entry: "vm-b-nic-ipconfig1", From: Down, To: None}},
		},
		"NIC pool: member not in the pool gets nothing": {
			pool:    nicPool([]string{cfgB}),
			members: []Member{{Node: "na", State: Down, IPConfigIDs: []string{cfgA}}},
			want:    map[string]string{},
		},
		"empty pool without properties": {
			pool:    &armnetwork.BackendAddressPool{Name: to.Ptr("p")},
			members: []Member{member("n1", Down, "10.0.0.4")},
			want:    map[string]string{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			before, _ := json.Marshal(tc.pool)
			needs := NeedsWrite(tc.pool, tc.members)
			after, _ := json.Marshal(tc.pool)
			if string(before) != string(after) {
				t.Fatal("NeedsWrite edited the pool")
			}
			got := Apply(tc.pool, tc.members)
			if !reflect.DeepEqual(got, tc.changes) {
				t.Errorf("changes = %+v, want %+v", got, tc.changes)
			}
			if needs != (len(tc.changes) > 0) {
				t.Errorf("NeedsWrite = %v with %d changes", needs, len(tc.changes))
			}
			if s := states(tc.pool); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("states = %v, want %v", s, tc.want)
			}
			// A second pass is a fixed point.
			if again := Apply(tc.pool, tc.members); again != nil {
				t.Errorf("second Apply changed %+v", again)
			}
		})
	}
	if Apply(nil, nil) != nil {
		t.Error("nil pool")
	}
}

func TestEntries(t *testing.T) {
	p := ipPool(ipEntry("n1", "10.0.0.4", down), ipEntry("n2", "10.0.0.5", nil), nicEntry("a", cfgA, none))
	got := Entries(p, Member{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.4")}, IPConfigIDs: []string{cfgA}})
	if want := map[string]State{"n1": Down, "a": None}; !reflect.DeepEqual(got, want) {
		t.Errorf("Entries = %v, want %v", got, want)
	}
}

func TestAppliedPoolSerialisesAdminState(t *testing.T) {
	p := ipPool(ipEntry("n1", "10.0.0.4", nil))
	Apply(p, []Member{member("n1", Down, "10.0.0.4")})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Properties struct {
			Addresses []struct {
				Properties map[string]any `json:"properties"`
			} `json:"loadBalancerBackendAddresses"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if got := wire.Properties.Addresses[0].Properties["adminState"]; got != "Down" {
		t.Errorf("wire adminState = %v in %s", got, b)
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func TestConfigIndex(t *testing.T) {
	vmssNode := "azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/pool0/virtualMachines/0"
	configs := []string{cfgA, cfgB, cfgA,
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool0/virtualMachines/01/networkInterfaces/pool0/ipConfigurations/ipconfig1"}
	for name, tc := range map[string]struct {
		providerID string
		want       []string
	}{
		"scale set instance (case-insensitive, deduplicated, no prefix clash with instance 01)": {vmssNode, []string{cfgA}},
		"standalone VM":     {"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-b", nil},
		"no providerID":     {"", nil},
		"other instance":    {"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool0/virtualMachines/7", nil},
		"trailing slash ok": {vmssNode + "/", []string{cfgA}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := NewConfigIndex(configs).Of(tc.providerID); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
