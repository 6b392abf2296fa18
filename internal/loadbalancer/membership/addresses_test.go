package membership

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

func testNode(name string, labels map[string]string, addrs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: a})
	}
	return n
}

func TestNodeFilter(t *testing.T) {
	deleting := testNode("gone", nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name   string
		filter NodeFilter
		node   *v1.Node
		want   string // "" eligible, else a word of the reason
	}{
		{"plain node", NodeFilter{}, testNode("n", nil), ""},
		{"being deleted", NodeFilter{}, deleting, "deleted"},
		{"exclude label", NodeFilter{}, testNode("n", map[string]string{LabelExcludeFromLB: ""}), LabelExcludeFromLB},
		{"legacy exclude label", NodeFilter{}, testNode("n", map[string]string{LabelNodeExcludeBalance: "true"}), LabelExcludeFromLB},
		{"unmanaged", NodeFilter{}, testNode("n", map[string]string{LabelManaged: "false"}), "unmanaged"},
		{"managed=true", NodeFilter{}, testNode("n", map[string]string{LabelManaged: "true"}), ""},
		{"other resource group", NodeFilter{ResourceGroup: "rg"}, testNode("n", map[string]string{LabelResourceGroup: "other"}), "resource group"},
		{"same resource group, other case", NodeFilter{ResourceGroup: "rg"}, testNode("n", map[string]string{LabelResourceGroup: "RG"}), ""},
		{"control plane kept", NodeFilter{}, testNode("n", map[string]string{LabelRoleControlPlane: ""}), ""},
		{"control plane excluded", NodeFilter{ExcludeControlPlane: true}, testNode("n", map[string]string{LabelRoleControlPlane: ""}), "control-plane"},
		{"master role excluded", NodeFilter{ExcludeControlPlane: true}, testNode("n", map[string]string{LabelRoleMaster: ""}), "control-plane"},
		{"legacy master role excluded", NodeFilter{ExcludeControlPlane: true}, testNode("n", map[string]string{LabelLegacyRole: "master"}), "control-plane"},
		{"legacy agent role kept", NodeFilter{ExcludeControlPlane: true}, testNode("n", map[string]string{LabelLegacyRole: "agent"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.filter.Excluded(tc.node)
			if (got == "") != (tc.want == "") || (tc.want != "" && !strings.Contains(got, tc.want)) {
				t.Errorf("Excluded = %q, want %q", got, tc.want)
			}
			if eligible := tc.filter.Eligible([]*v1.Node{tc.node, nil}); (len(eligible) == 1) != (tc.want == "") {
				t.Errorf("Eligible = %v", eligible)
			}
		})
	}
}

func TestAddressEntries(t *testing.T) {
	nodes := []*v1.Node{
		testNode("a", nil, "10.0.0.4", "fd00::4", "10.0.0.5"),
		testNode("b", nil, "10.0.0.6", "not-an-ip"),
		testNode("c", nil),
	}
	nodes[1].Status.Addresses = append(nodes[1].Status.Addresses, v1.NodeAddress{Type: v1.NodeExternalIP, Address: "203.0.113.9"})
	for _, tc := range []struct {
		fam  naming.Family
		want map[string]string
	}{
		{naming.IPv4, map[string]string{"10.0.0.4": "a", "10.0.0.5": "a-1", "10.0.0.6": "b"}},
		{naming.IPv6, map[string]string{"fd00::4": "a"}},
	} {
		if got := AddressEntries(nodes, tc.fam); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.fam, got, tc.want)
		}
	}
}

func TestLocalPoolEntries(t *testing.T) {
	eligible := []*v1.Node{testNode("a", nil, "10.0.0.4"), testNode("b", nil, "10.0.0.5")}
	for _, tc := range []struct {
		name  string
		hosts []string
		known bool
		want  map[string]string
	}{
		{"endpoints unknown: every eligible node", nil, false, map[string]string{"10.0.0.4": "a", "10.0.0.5": "b"}},
		{"no ready endpoint: empty", nil, true, map[string]string{}},
		{"hosts only", []string{"b"}, true, map[string]string{"10.0.0.5": "b"}},
		{"a host that is not eligible is not added", []string{"b", "control-plane"}, true, map[string]string{"10.0.0.5": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LocalPoolEntries(eligible, tc.hosts, tc.known, naming.IPv4); !maps.Equal(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

func entry(name, ip string, state armnetwork.LoadBalancerBackendAddressAdminState) *armnetwork.LoadBalancerBackendAddress {
	e := &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name),
		Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(ip)}}
	if state != "" {
		e.Properties.AdminState = to.Ptr(state)
	}
	return e
}

func renderPool(p *armnetwork.BackendAddressPool) string {
	out := ""
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		st := ""
		if a.Properties.AdminState != nil {
			st = "/" + string(*a.Properties.AdminState)
		}
		out += fmt.Sprintf("%s=%s%s ", *a.Name, *a.Properties.IPAddress, st)
	}
	return out
}

func TestSetAddresses(t *testing.T) {
	const vnet = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
	for _, tc := range []struct {
		name string
		have []*armnetwork.LoadBalancerBackendAddress
		want map[string]string
		out  string
		same bool
	}{
		{"empty pool filled in address order", nil, map[string]string{"10.0.0.6": "b", "10.0.0.4": "a"}, "a=10.0.0.4 b=10.0.0.6 ", false},
		{"entries that stay keep their admin state", []*armnetwork.LoadBalancerBackendAddress{
			entry("b", "10.0.0.6", armnetwork.LoadBalancerBackendAddressAdminStateDown), entry("old", "10.0.0.9", "")},
			map[string]string{"10.0.0.6": "b", "10.0.0.4": "a"}, "b=10.0.0.6/Down a=10.0.0.4 ", false},
		{"unchanged", []*armnetwork.LoadBalancerBackendAddress{entry("a", "10.0.0.4", "")},
			map[string]string{"10.0.0.4": "a"}, "a=10.0.0.4 ", true},
		{"emptied", []*armnetwork.LoadBalancerBackendAddress{entry("a", "10.0.0.4", "")}, map[string]string{}, "", false},
		{"an entry without address is dropped", []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("x")}},
			map[string]string{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: tc.have}}
			if got := SameAddresses(p, tc.want); got != tc.same {
				t.Errorf("SameAddresses = %v, want %v", got, tc.same)
			}
			// SetAddresses changes the pool exactly when it did not hold the addresses.
			if changed := SetAddresses(p, tc.want, vnet); changed == tc.same {
				t.Errorf("SetAddresses reported changed=%v, want %v", changed, !tc.same)
			}
			if got := renderPool(p); got != tc.out {
				t.Errorf("pool %q, want %q", got, tc.out)
			}
			if !SameAddresses(p, tc.want) {
				t.Error("SameAddresses false after SetAddresses")
			}
			if len(tc.want) > 0 && (p.Properties.VirtualNetwork == nil || *p.Properties.VirtualNetwork.ID != vnet) {
				t.Error("pool has no virtual network")
			}
		})
	}
}
