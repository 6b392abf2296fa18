package arm

import "testing"

func TestParseOperation(t *testing.T) {
	cases := []struct {
		method, path string
		want         Operation
	}{
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb", Operation{"get", "Microsoft.Network", "loadBalancers"}},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers", Operation{"list", "Microsoft.Network", "loadBalancers"}},
		{"PUT", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/routeTables/rt", Operation{"put", "Microsoft.Network", "routeTables"}},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines", Operation{"list", "Microsoft.Compute", "virtualMachineScaleSets/virtualMachines"}},
		{"GET", "/subscriptions/s/resourceGroups/rg/providers/microsoft.compute/virtualMachineScaleSets/ss/virtualMachines/3", Operation{"get", "microsoft.compute", "virtualMachineScaleSets/virtualMachines"}},
		{"DELETE", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p", Operation{"delete", "Microsoft.Network", "publicIPAddresses"}},
		{"POST", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/start", Operation{"post", "Microsoft.Compute", "virtualMachines/start"}},
		{"GET", "/subscriptions/s/providers/Microsoft.Compute", Operation{"get", "Microsoft.Compute", "providers"}},
		{"GET", "/subscriptions/s/providers/Microsoft.Network/locations/eastus/operations/abc", Operation{"get", "Microsoft.Network", "locations/operations"}},
		{"GET", "/subscriptions/s/resourceGroups/rg", Operation{"get", "", "resourceGroups"}},
	}
	for _, tc := range cases {
		if got := ParseOperation(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s: got %+v want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}
