package middleware

import (
	"net/http/httptest"
	"testing"
)

func TestClassify(t *testing.T) {
	const sub = "/subscriptions/s1"
	for _, tc := range []struct {
		method, path string
		want         Op
	}{
		{"GET", "/subscriptions", Op{Class: Read, ResourceType: "Microsoft.Resources/subscriptions", List: true}},
		{"GET", sub, Op{Class: Read, ResourceType: "Microsoft.Resources/subscriptions", Subscription: "s1"}},
		{"GET", sub + "/resourcegroups", Op{Class: Read, ResourceType: "Microsoft.Resources/resourceGroups", Subscription: "s1", List: true}},
		{"PUT", sub + "/resourceGroups/rg", Op{Class: Write, ResourceType: "Microsoft.Resources/resourceGroups", Subscription: "s1"}},
		{"DELETE", sub + "/resourceGroups/rg", Op{Class: Delete, ResourceType: "Microsoft.Resources/resourceGroups", Subscription: "s1"}},
		{"GET", sub + "/providers/Microsoft.Compute", Op{Class: Read, ResourceType: "Microsoft.Resources/providers", Subscription: "s1"}},
		{"GET", sub + "/providers", Op{Class: Read, ResourceType: "Microsoft.Resources/providers", Subscription: "s1", List: true}},
		{"GET", sub + "/providers/Microsoft.Network/loadBalancers", Op{Class: Read, ResourceType: "Microsoft.Network/loadBalancers", Subscription: "s1", List: true}},
		{"GET", sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers", Op{Class: Read, ResourceType: "Microsoft.Network/loadBalancers", Subscription: "s1", List: true}},
		{"PUT", sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb", Op{Class: Write, ResourceType: "Microsoft.Network/loadBalancers", Subscription: "s1"}},
		{"PATCH", sub + "/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p", Op{Class: Write, ResourceType: "Microsoft.Network/publicIPAddresses", Subscription: "s1"}},
		{"PUT", sub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/backendAddressPools/pool", Op{Class: Write, ResourceType: "Microsoft.Network/loadBalancers/backendAddressPools", Subscription: "s1"}},
		{"GET", sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines", Op{Class: Read, ResourceType: "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", Subscription: "s1", List: true}},
		{"POST", sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/deallocate", Op{Class: Action, ResourceType: "Microsoft.Compute/virtualMachineScaleSets", Action: "deallocate", Subscription: "s1"}},
		{"POST", sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/restart", Op{Class: Action, ResourceType: "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", Action: "restart", Subscription: "s1"}},
		{"GET", sub + "/providers/Microsoft.Network/locations/eastus/operations/abc", Op{Class: Read, ResourceType: "Microsoft.Network/locations/operations", Subscription: "s1"}},
		{"GET", sub + "/operationresults/abc", Op{Class: Read, ResourceType: "Microsoft.Resources/operationresults", Subscription: "s1"}},
		{"GET", "/metadata/endpoints", Op{Class: Read}},
	} {
		r := httptest.NewRequest(tc.method, tc.path+"?api-version=x", nil)
		tc.want.Method = tc.method
		if got := Classify(r); got != tc.want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestTypeMatches(t *testing.T) {
	for _, tc := range []struct {
		sel, typ string
		want     bool
	}{
		{"", "Microsoft.Network/loadBalancers", true},
		{"microsoft.network/loadbalancers", "Microsoft.Network/loadBalancers", true},
		{"loadBalancers", "Microsoft.Network/loadBalancers", true},
		{"loadBalancers", "Microsoft.Network/loadBalancers/backendAddressPools", false},
		{"backendAddressPools", "Microsoft.Network/loadBalancers/backendAddressPools", true},
		{"Balancers", "Microsoft.Network/loadBalancers", false},
	} {
		if got := typeMatches(tc.sel, tc.typ); got != tc.want {
			t.Errorf("typeMatches(%q, %q) = %v", tc.sel, tc.typ, got)
		}
	}
}
