package nodes

import (
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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

// FuzzParseVMResourceID: an accepted ID names a VM or scale set VM and formats back to an ID
// that parses to the same value.
func FuzzParseVMResourceID(f *testing.F) {
	for _, s := range []string{
		"/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-0",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3",
		"subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/", "/subscriptions//resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseVMResourceID(s)
		if err != nil {
			return
		}
		if p.Kind != KindVM && p.Kind != KindScaleSetVM {
			t.Fatalf("%q: kind %v", s, p.Kind)
		}
		again, err := ParseVMResourceID(p.ResourceID())
		if err != nil || again != p {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, p, p.ResourceID(), again, err)
		}
	})
}

// FuzzIMDS: any instance metadata document either is refused or gives a node a provider ID
// that parses, label values Kubernetes accepts and addresses that are IPs.
func FuzzIMDS(f *testing.F) {
	for _, s := range []string{
		`{"compute":{"resourceId":"/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-0","location":"eastus","zone":"2","vmSize":"Standard_D2s_v5","platformFaultDomain":"1"},
		  "network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.4","publicIpAddress":"203.0.113.9"}]},"ipv6":{"ipAddress":[{"privateIpAddress":"fd00::4"}]}}]}}`,
		`{"compute":{"resourceId":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3","location":"West Europe","platformFaultDomain":"x"}}`,
		`{"compute":{}}`, `[]`, `{"network":{"interface":[]}}`,
		// Edge cases: a zone with no location, a signed fault domain.
		`{"compute":{"resourceId":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v","zone":"2"},"network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.4"}]}}]}}`,
		`{"compute":{"resourceId":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v","location":"eastus","platformFaultDomain":"-2"},"network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.4"}]}}]}}`,
	} {
		f.Add([]byte(s), "node-0")
	}
	f.Fuzz(func(t *testing.T, body []byte, nodeName string) {
		doc, err := DecodeIMDS(body)
		if err != nil {
			return
		}
		md, err := MetadataFromIMDS(doc, nodeName)
		if err != nil {
			return
		}
		if _, err := ParseProviderID(md.ProviderID); err != nil {
			t.Fatalf("provider ID %q does not parse: %v", md.ProviderID, err)
		}
		for what, v := range map[string]string{"instance type": md.InstanceType, "zone": md.Zone, "region": md.Region} {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Fatalf("%s %q is not a label value: %v", what, v, errs)
			}
		}
		for _, a := range md.Addresses {
			if a.Type != v1.NodeHostName && net.ParseIP(a.Address) == nil {
				t.Fatalf("%s address %q is not an IP", a.Type, a.Address)
			}
		}
	})
}
