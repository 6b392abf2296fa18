package arm

import "testing"

func TestParseID(t *testing.T) {
	cases := []struct {
		in         string
		str        string
		typ        string
		collection bool
		err        bool
	}{
		{in: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/loadBalancers/lb",
			str: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/loadBalancers/lb", typ: "Microsoft.Network/loadBalancers"},
		{in: "/SUBSCRIPTIONS/s/resourcegroups/g/PROVIDERS/microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/n",
			str: "/subscriptions/s/resourceGroups/g/providers/microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/n",
			typ: "microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces"},
		{in: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/loadBalancers", str: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/loadBalancers",
			typ: "Microsoft.Network/loadBalancers", collection: true},
		{in: "/subscriptions/s/providers/Microsoft.Network/publicIPAddresses", str: "/subscriptions/s/providers/Microsoft.Network/publicIPAddresses",
			typ: "Microsoft.Network/publicIPAddresses", collection: true},
		{in: "/subscriptions/s/resourcegroups/G1", str: "/subscriptions/s/resourceGroups/G1", typ: "Microsoft.Resources/resourceGroups"},
		{in: "/subscriptions/s/resourcegroups", str: "/subscriptions/s/resourceGroups", typ: "Microsoft.Resources/resourceGroups", collection: true},
		{in: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v%20x/subnets/s1",
			str: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v x/subnets/s1", typ: "Microsoft.Network/virtualNetworks/subnets"},
		{in: "/foo/bar", err: true},
		{in: "", err: true},
		{in: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network", err: true},
		{in: "/subscriptions/s//resourceGroups", err: true},
		{in: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/x/%zz", err: true},
	}
	for _, c := range cases {
		id, err := ParseID(c.in)
		if c.err {
			if err == nil {
				t.Errorf("%q: expected error, got %+v", c.in, id)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if id.String() != c.str || id.FullType() != c.typ || id.IsCollection() != c.collection {
			t.Errorf("%q: got %s %s %v", c.in, id.String(), id.FullType(), id.IsCollection())
		}
	}
}

func TestParentChildAndKeys(t *testing.T) {
	id := MustParseID("/subscriptions/s/resourceGroups/G/providers/Microsoft.Network/loadBalancers/LB/backendAddressPools/P")
	p, ok := id.Parent()
	if !ok || p.String() != "/subscriptions/s/resourceGroups/G/providers/Microsoft.Network/loadBalancers/LB" {
		t.Fatalf("parent %v", p)
	}
	if _, ok := p.Parent(); ok {
		t.Fatal("top-level resource has a parent")
	}
	if c := p.Child("probes", "x").String(); c != p.String()+"/probes/x" {
		t.Fatalf("child %s", c)
	}
	if !SameID(id.String(), "/SUBSCRIPTIONS/s/resourcegroups/g/providers/microsoft.network/loadbalancers/lb/backendaddresspools/p") {
		t.Fatal("SameID is case-sensitive")
	}
	if id.Scope() != "/subscriptions/s/resourceGroups/G" {
		t.Fatalf("scope %s", id.Scope())
	}
}
