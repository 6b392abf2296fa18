package compute

import (
	"strings"
	"testing"
)

// FuzzVMListFilter: a $filter of the VM list is either refused or names a scale set that the
// filter then matches (in any ASCII casing: Unicode case mappings such as "ı" → "I" are not
// foldings, and ARM names are ASCII), never one containing a quote.
func FuzzVMListFilter(f *testing.F) {
	for _, s := range []string{
		"'virtualMachineScaleSet/id' eq '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/flex0'",
		"virtualMachineScaleSet/id eq 'x'", "name eq 'vm'", "", "   ", "'virtualMachineScaleSet/id' eq ''''",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lf, err := ParseVMListFilter(s)
		if err != nil {
			if !strings.Contains(err.Error(), "is not supported") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if strings.Contains(lf.ScaleSetID, "'") {
			t.Fatalf("%q: scale set %q", s, lf.ScaleSetID)
		}
		upper := []byte(lf.ScaleSetID) // byte-wise: invalid UTF-8 stays as it is
		for i, c := range upper {
			if 'a' <= c && c <= 'z' {
				upper[i] = c - 'a' + 'A'
			}
		}
		if !lf.Match(string(upper)) {
			t.Fatalf("%q: filter does not match its own scale set %q", s, lf.ScaleSetID)
		}
	})
}
