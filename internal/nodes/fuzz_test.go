package nodes

import (
	"strings"
	"testing"
)

// FuzzParseProviderID: any input either fails or parses into an ID whose canonical string
// parses back to the same ID (the node map and caches key on that string).
func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{
		"azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-0",
		"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3",
		"azure://onprem-1", "azure://", "azure:///", "aws:///x", "AZURE:///SUBSCRIPTIONS/S/RESOURCEGROUPS/R/PROVIDERS/MICROSOFT.COMPUTE/VIRTUALMACHINES/V",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProviderID(s)
		if err != nil {
			return
		}
		if p.Kind == KindUnmanaged {
			if p.Name == "" || strings.Contains(p.Name, "/") {
				t.Fatalf("%q: unmanaged node name %q", s, p.Name)
			}
			return
		}
		again, err := ParseProviderID(p.String())
		if err != nil {
			t.Fatalf("%q parsed to %+v whose string %q does not parse: %v", s, p, p.String(), err)
		}
		if again != p {
			t.Fatalf("%q: round trip %+v != %+v", s, again, p)
		}
	})
}
