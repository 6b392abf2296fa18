package middleware

import (
	"fmt"
	"strings"
	"testing"
)

func TestAddressedResource(t *testing.T) {
	for _, tc := range []struct {
		path, typ, group, name string
	}{
		{lbPath, "Microsoft.Network/loadBalancers", "rg", "lb"},
		{lbPath + "/backendAddressPools/pool", "Microsoft.Network/loadBalancers", "rg", "lb"},
		{"/subscriptions/s1/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/vmss/virtualMachines/3", "Microsoft.Compute/virtualMachineScaleSets", "RG", "vmss"},
		// Collections, LRO status and non-ARM paths name no resource.
		{path: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/loadBalancers"},
		{path: "/subscriptions/s1/providers/Microsoft.Network/locations/eastus/operations/op1"},
		{path: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/locations/eastus/operations/op1"},
		{path: "/subscriptions/s1/resourceGroups/rg"},
		{path: "/metadata/instance"},
	} {
		got, ok := addressedResource(tc.path)
		if ok != (tc.name != "") || got.ResourceType != tc.typ || got.ResourceGroup != tc.group || got.Name != tc.name {
			t.Errorf("%s: got %+v ok=%v, want %s %s/%s", tc.path, got, ok, tc.typ, tc.group, tc.name)
		}
	}
}

func TestCountersByResource(t *testing.T) {
	m, _, _, _ := newTestMiddleware(Options{})
	lb2 := "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb-2"
	do(m, "GET", lbPath)
	do(m, "PUT", lbPath)
	do(m, "PUT", lbPath+"/backendAddressPools/p1")
	do(m, "PUT", "/subscriptions/s1/resourceGroups/RG/providers/Microsoft.Network/loadBalancers/LB") // another spelling
	do(m, "DELETE", lb2)
	do(m, "GET", "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/loadBalancers") // list: no resource
	s := m.Stats()
	for _, tc := range []struct {
		class     Class
		typ, name string
		group     string
		want      int64
		what      string
	}{
		{Write, "loadBalancers", "lb", "", 3, "writes of lb and its pool, both spellings"},
		{Read, "Microsoft.Network/loadBalancers", "lb", "rg", 1, "reads of lb"},
		{"", "loadBalancers", "lb", "", 4, "every request of lb"},
		{Delete, "loadBalancers", "lb-2", "", 1, "deletes of lb-2"},
		{Write, "loadBalancers", "lb-2", "", 0, "writes of lb-2"},
		{Write, "publicIPAddresses", "lb", "", 0, "another type"},
		{Write, "loadBalancers", "lb", "other", 0, "another group"},
	} {
		if got := s.ByResource(tc.class, tc.typ, tc.group, tc.name); got != tc.want {
			t.Errorf("%s: %d, want %d (resources %+v)", tc.what, got, tc.want, s.Resources)
		}
	}
	// lb read, lb write (both spellings), lb-2 delete; the list has no entry.
	if len(s.Resources) != 3 {
		t.Errorf("%d resource counts, want 3: %+v", len(s.Resources), s.Resources)
	}
	m.ResetStats()
	if s := m.Stats(); len(s.Resources) != 0 {
		t.Errorf("after reset: %+v", s.Resources)
	}
}

// TestCountersOneRowPerType: a type spelled in another case by a client (the SDK's scale set
// NIC views use "microsoft.Compute") is counted in the same row, under the canonical spelling.
func TestCountersOneRowPerType(t *testing.T) {
	canonical := func(s string) string {
		if strings.EqualFold(s, "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces") {
			return "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces"
		}
		return s
	}
	m, _, _, _ := newTestMiddleware(Options{CanonicalType: canonical})
	do(m, "GET", "/subscriptions/s1/resourceGroups/rg/providers/microsoft.Compute/virtualMachineScaleSets/ss/networkInterfaces")
	do(m, "GET", "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/networkInterfaces")
	do(m, "GET", "/subscriptions/s1/resourceGroups/rg/providers/MICROSOFT.COMPUTE/VIRTUALMACHINESCALESETS/ss/networkInterfaces")
	var rows []string
	for _, c := range m.Stats().Requests {
		rows = append(rows, fmt.Sprintf("%s %s %d", c.Method, c.ResourceType, c.Count))
	}
	if want := "GET Microsoft.Compute/virtualMachineScaleSets/networkInterfaces 3"; strings.Join(rows, "|") != want {
		t.Errorf("rows %q, want %q", rows, want)
	}
}
