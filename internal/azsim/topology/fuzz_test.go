package topology

import "testing"

// FuzzParseNormalizePlan: a topology file from a user either is refused with an error or
// normalises and plans its ARM requests without panicking (huge capacities are refused by
// validation, not by running out of memory).
func FuzzParseNormalizePlan(f *testing.F) {
	for _, s := range []string{
		"location: eastus\nresourceGroups: [rg]\nvirtualNetworks:\n- {resourceGroup: rg, name: v, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.1.0.0/16}]}\nscaleSets:\n- {resourceGroup: rg, name: pool, capacity: 3, zones: ['1','2']}\n",
		`{"location":"westus2","availabilitySets":[{"resourceGroup":"rg","name":"as","vms":2,"ipv6":true}]}`,
		"virtualMachines: [{resourceGroup: rg, name: vm, zone: '9'}]", "scaleSets: [{capacity: -1}]", "{", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		topo, err := Parse(b)
		if err != nil {
			return
		}
		n, err := topo.Normalize()
		if err != nil {
			return
		}
		_ = Plan(n)
	})
}
