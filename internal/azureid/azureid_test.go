package azureid

import "testing"

func TestReadIDs(t *testing.T) {
	const sub = "00000000-0000-0000-0000-000000000001"
	lb := LoadBalancer(sub, "rg-net", "kubernetes-internal")
	for _, tc := range []struct {
		id, name, rg, parent string
	}{
		{id: lb, name: "kubernetes-internal", rg: "rg-net"},
		{id: BackendPool(lb, "kubernetes"), name: "kubernetes", rg: "rg-net", parent: lb},
		{id: ScaleSetVM(sub, "RG-Nodes", "ss", "7"), name: "7", rg: "RG-Nodes", parent: ScaleSet(sub, "RG-Nodes", "ss")},
		{id: Subnet(sub, "rg", "vnet", "snet"), name: "snet", rg: "rg", parent: VirtualNetwork(sub, "rg", "vnet")},
		{id: PublicIP(sub, "rg", "pip"), name: "pip", rg: "rg"},
		{id: ScaleSetVM(sub, "rg", "ss", "0") + "/networkInterfaces/nic/ipConfigurations/ipconfig1", name: "ipconfig1", rg: "rg",
			parent: ScaleSetVM(sub, "rg", "ss", "0") + "/networkInterfaces/nic"},
		// Lower-cased segments, as some ARM back-references are.
		{id: "/subscriptions/" + sub + "/resourcegroups/rg/providers/microsoft.network/loadbalancers/lb/backendaddresspools/p",
			name: "p", rg: "rg", parent: "/subscriptions/" + sub + "/resourceGroups/rg/providers/microsoft.network/loadbalancers/lb"},
		// Not an ID: the last segment still names it, nothing else is known.
		{id: "kubernetes/backendAddressPools/pool", name: "pool"},
		{id: "", name: ""},
	} {
		if got := Name(tc.id); got != tc.name {
			t.Errorf("Name(%q) = %q, want %q", tc.id, got, tc.name)
		}
		if got := ResourceGroup(tc.id); got != tc.rg {
			t.Errorf("ResourceGroup(%q) = %q, want %q", tc.id, got, tc.rg)
		}
		if got := Parent(tc.id); got != tc.parent {
			t.Errorf("Parent(%q) = %q, want %q", tc.id, got, tc.parent)
		}
	}
}

func TestIsType(t *testing.T) {
	lb := LoadBalancer("s", "rg", "lb")
	for _, tc := range []struct {
		id, typ string
		want    bool
	}{
		{lb, "Microsoft.Network/loadBalancers", true},
		{lb, "microsoft.network/LOADBALANCERS", true},
		{BackendPool(lb, "p"), "Microsoft.Network/loadBalancers/backendAddressPools", true},
		{BackendPool(lb, "p"), "Microsoft.Network/loadBalancers", false},
		{ScaleSetVM("s", "rg", "ss", "1"), "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", true},
		{"not/an/id", "Microsoft.Network/loadBalancers", false},
	} {
		if got := IsType(tc.id, tc.typ); got != tc.want {
			t.Errorf("IsType(%q, %q) = %v, want %v", tc.id, tc.typ, got, tc.want)
		}
	}
}
