package membership

import (
	"strings"
	"testing"
)

// FuzzParseIPConfigID: an accepted ID names its owner (the resource written to change the
// membership), which is a prefix of the ID, and the NIC and ip configuration it ends with.
func FuzzParseIPConfigID(f *testing.F) {
	for _, s := range []string{
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-0/ipConfigurations/ipconfig1",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3/networkInterfaces/nic/ipConfigurations/ipc",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-0", "networkInterfaces/a/ipConfigurations/b", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r, err := ParseIPConfigID(id)
		if err != nil {
			return
		}
		if r.ID != id || !strings.HasPrefix(id, r.Owner+"/") {
			t.Fatalf("%q: owner %q is not a prefix of the ID", id, r.Owner)
		}
		for _, name := range []string{r.ResourceGroup, r.NIC, r.IPConfig} {
			if name == "" || strings.Contains(name, "/") {
				t.Fatalf("%q: name %q in %+v", id, name, r)
			}
		}
		if seg := strings.Split(id, "/"); seg[len(seg)-1] != r.IPConfig || seg[len(seg)-3] != r.NIC {
			t.Fatalf("%q: NIC %q and ip configuration %q are not its last segments", id, r.NIC, r.IPConfig)
		}
		if strings.Contains(id[1:], "//") || strings.HasSuffix(id, "/") {
			t.Fatalf("%q: accepted with an empty segment", id)
		}
		switch r.Kind {
		case KindNIC:
			if r.ScaleSet != "" || r.InstanceID != "" {
				t.Fatalf("%q: NIC with a scale set %+v", id, r)
			}
		case KindScaleSetVM:
			if !strings.HasSuffix(strings.ToLower(r.Owner), strings.ToLower("/virtualMachineScaleSets/"+r.ScaleSet+"/virtualMachines/"+r.InstanceID)) {
				t.Fatalf("%q: scale set VM owner %q", id, r.Owner)
			}
		default:
			t.Fatalf("%q: kind %v", id, r.Kind)
		}
	})
}
