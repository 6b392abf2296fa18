package disks

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// CSIDriver is the Azure disk CSI driver's name; PVs with it carry the disk resource ID as
// volume handle. The provisioner writes its PVs in this form too.
const CSIDriver = "disk.csi.azure.com"

// DiskID is a parsed managed disk resource ID.
type DiskID struct {
	SubscriptionID, ResourceGroup, Name string
}

func (d DiskID) String() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/disks/%s", d.SubscriptionID, d.ResourceGroup, d.Name)
}

// ParseDiskID parses /subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/disks/<name>.
func ParseDiskID(id string) (DiskID, error) {
	p := strings.Split(strings.Trim(strings.TrimSpace(id), "/"), "/")
	if len(p) != 8 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
		!strings.EqualFold(p[4], "providers") || !strings.EqualFold(p[5], "Microsoft.Compute") || !strings.EqualFold(p[6], "disks") ||
		p[1] == "" || p[3] == "" || p[7] == "" {
		return DiskID{}, fmt.Errorf("%q is not a managed disk resource ID (/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/disks/<name>)", id)
	}
	return DiskID{SubscriptionID: p[1], ResourceGroup: p[3], Name: p[7]}, nil
}

// VolumeKind classifies a PV for the zone labeller.
type VolumeKind int

const (
	// NotAzureDisk: neither an azureDisk source nor the disk CSI driver; ignored.
	NotAzureDisk VolumeKind = iota
	// ManagedDisk: DiskOf returned the disk's ID.
	ManagedDisk
	// UnmanagedDisk: a blob (VHD) disk; it has no zone and is left unlabelled.
	UnmanagedDisk
)

// DiskOf returns what disk a PV refers to. For UnmanagedDisk and malformed IDs reason says why
// nothing can be done (an event for the user).
func DiskOf(pv *v1.PersistentVolume) (kind VolumeKind, id DiskID, reason string) {
	switch {
	case pv.Spec.AzureDisk != nil:
		ad := pv.Spec.AzureDisk
		if ad.Kind != nil && *ad.Kind != v1.AzureManagedDisk {
			return UnmanagedDisk, DiskID{}, fmt.Sprintf("azureDisk kind %s is a blob disk; only managed disks have availability zones", *ad.Kind)
		}
		parsed, err := ParseDiskID(ad.DataDiskURI)
		if err != nil {
			if ad.Kind == nil || strings.Contains(strings.ToLower(ad.DataDiskURI), ".blob.") {
				return UnmanagedDisk, DiskID{}, fmt.Sprintf("azureDisk %s is a blob disk (%s); only managed disks have availability zones", ad.DiskName, ad.DataDiskURI)
			}
			return UnmanagedDisk, DiskID{}, err.Error()
		}
		return ManagedDisk, parsed, ""
	case pv.Spec.CSI != nil && strings.EqualFold(pv.Spec.CSI.Driver, CSIDriver):
		parsed, err := ParseDiskID(pv.Spec.CSI.VolumeHandle)
		if err != nil {
			return UnmanagedDisk, DiskID{}, "CSI volume handle: " + err.Error()
		}
		return ManagedDisk, parsed, ""
	}
	return NotAzureDisk, DiskID{}, ""
}
