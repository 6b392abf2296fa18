package disks

import (
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzParseDiskID: an accepted disk ID formats back to an ID that parses to the same value.
func FuzzParseDiskID(f *testing.F) {
	for _, s := range []string{
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/pvc-1",
		" /subscriptions/s/resourcegroups/RG/providers/microsoft.compute/DISKS/d/ ", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/snapshots/x", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDiskID(s)
		if err != nil {
			return
		}
		again, err := ParseDiskID(d.String())
		if err != nil || again != d {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, d, d.String(), again, err)
		}
	})
}

// FuzzParseClass: StorageClass parameters either are refused or give a known SKU and caching
// mode, and a resource group ARM would accept as a name.
func FuzzParseClass(f *testing.F) {
	f.Add("skuname", "Premium_LRS", "zoned", "true", "resourceGroup", "rg-disks")
	f.Add("storageaccounttype", "standardssd_lrs", "zones", "1,2", "cachingmode", "ReadOnly")
	f.Add("kind", "Managed", "zone", "3", "fsType", "xfs")
	f.Add("resourceGroup", "../other", "zoned", "maybe", "x", "y")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Provisioner: "disk.azure-ccm.io",
			Parameters: map[string]string{k1: v1, k2: v2, k3: v3}}
		c, err := ParseClass(sc)
		if err != nil {
			return
		}
		if _, ok := skus[strings.ToLower(c.SKU)]; !ok {
			t.Fatalf("SKU %q accepted", c.SKU)
		}
		if c.ResourceGroup != "" && !validResourceGroup(c.ResourceGroup) {
			t.Fatalf("resource group %q accepted", c.ResourceGroup)
		}
		switch strings.ToLower(c.CachingMode) {
		case "", "none", "readonly", "readwrite":
		default:
			t.Fatalf("caching mode %q accepted", c.CachingMode)
		}
	})
}
