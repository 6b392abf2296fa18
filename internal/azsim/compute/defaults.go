package compute

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

// Server-side defaults CRP fills in (as seen in the recordings). They only
// fill fields the client left out, so applying them again is a no-op.

// DefaultScaleSet fills a scale set model's server defaults.
func DefaultScaleSet(ss *armcompute.VirtualMachineScaleSet) {
	if ss.SKU != nil && ss.SKU.Tier == nil {
		ss.SKU.Tier = to.Ptr("Standard")
	}
	p := ss.Properties
	if p.OrchestrationMode == nil {
		p.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeUniform)
	}
	flex := IsFlexible(ss)
	if p.PlatformFaultDomainCount == nil {
		n := DefaultFaultDomains(len(ss.Zones) > 0)
		if flex {
			n = 1
		}
		p.PlatformFaultDomainCount = to.Ptr(int32(n))
	}
	if p.SinglePlacementGroup == nil {
		p.SinglePlacementGroup = to.Ptr(!flex)
	}
	if !flex && p.UpgradePolicy == nil {
		p.UpgradePolicy = &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)}
	}
	DefaultNICConfigs(scaleSetNICConfigs(ss))
	if prof := p.VirtualMachineProfile; prof != nil {
		DefaultScaleSetOSDisk(prof.StorageProfile)
	}
}

// DefaultNICConfigs fills the defaults of scale set NIC configurations.
func DefaultNICConfigs(nics []*armcompute.VirtualMachineScaleSetNetworkConfiguration) {
	for _, nic := range nics {
		if nic == nil || nic.Properties == nil {
			continue
		}
		p := nic.Properties
		if p.EnableAcceleratedNetworking == nil {
			p.EnableAcceleratedNetworking = to.Ptr(false)
		}
		if p.DisableTCPStateTracking == nil {
			p.DisableTCPStateTracking = to.Ptr(false)
		}
		if p.DNSSettings == nil {
			p.DNSSettings = &armcompute.VirtualMachineScaleSetNetworkConfigurationDNSSettings{DNSServers: []*string{}}
		}
		for _, ipc := range p.IPConfigurations {
			if ipc == nil {
				continue
			}
			if ipc.Properties == nil {
				ipc.Properties = &armcompute.VirtualMachineScaleSetIPConfigurationProperties{}
			}
			if ipc.Properties.PrivateIPAddressVersion == nil {
				ipc.Properties.PrivateIPAddressVersion = to.Ptr(armcompute.IPVersionIPv4)
			}
		}
	}
}

// DefaultDisk fills a managed disk's server defaults.
func DefaultDisk(d *armcompute.Disk) {
	p := d.Properties
	if p.Encryption == nil {
		p.Encryption = &armcompute.Encryption{Type: to.Ptr(armcompute.EncryptionTypeEncryptionAtRestWithPlatformKey)}
	}
	if p.NetworkAccessPolicy == nil {
		p.NetworkAccessPolicy = to.Ptr(armcompute.NetworkAccessPolicyAllowAll)
	}
	if p.PublicNetworkAccess == nil {
		p.PublicNetworkAccess = to.Ptr(armcompute.PublicNetworkAccessEnabled)
	}
	if p.DiskIOPSReadWrite == nil {
		p.DiskIOPSReadWrite = to.Ptr[int64](500)
	}
	if p.DiskMBpsReadWrite == nil {
		p.DiskMBpsReadWrite = to.Ptr[int64](60)
	}
}

// osTypeOf is the OS type CRP derives for a disk created from an image when the client named
// none: Windows for Windows Server images, Linux for everything else.
func osTypeOf(img *armcompute.ImageReference) armcompute.OperatingSystemTypes {
	if img != nil && img.Publisher != nil && strings.Contains(strings.ToLower(*img.Publisher), "windows") {
		return armcompute.OperatingSystemTypesWindows
	}
	return armcompute.OperatingSystemTypesLinux
}

// defaultOSDiskSizeGB is the size CRP gives an image's OS disk when the client named none.
func defaultOSDiskSizeGB(t armcompute.OperatingSystemTypes) int32 {
	if t == armcompute.OperatingSystemTypesWindows {
		return 127
	}
	return 30
}

// DefaultVMOSDisk fills what CRP returns for a VM's OS disk created from an image: osType
// (real clients dereference it), the size and, if the client named none, the disk's name
// "<vm>_OsDisk_1_<32 hex digits>".
func DefaultVMOSDisk(sp *armcompute.StorageProfile, vmName, unique string) {
	if sp == nil || sp.OSDisk == nil {
		return
	}
	d := sp.OSDisk
	if d.CreateOption != nil && *d.CreateOption != armcompute.DiskCreateOptionTypesFromImage {
		return
	}
	if d.OSType == nil {
		d.OSType = to.Ptr(osTypeOf(sp.ImageReference))
	}
	if d.DiskSizeGB == nil {
		d.DiskSizeGB = to.Ptr(defaultOSDiskSizeGB(*d.OSType))
	}
	if d.Name == nil && unique != "" {
		d.Name = to.Ptr(vmName + "_OsDisk_1_" + strings.ReplaceAll(unique, "-", ""))
	}
}

// DefaultScaleSetOSDisk fills osType and size of a scale set model's OS disk created from an
// image.
func DefaultScaleSetOSDisk(sp *armcompute.VirtualMachineScaleSetStorageProfile) {
	if sp == nil || sp.OSDisk == nil {
		return
	}
	d := sp.OSDisk
	if d.CreateOption != nil && *d.CreateOption != armcompute.DiskCreateOptionTypesFromImage {
		return
	}
	if d.OSType == nil {
		d.OSType = to.Ptr(osTypeOf(sp.ImageReference))
	}
	if d.DiskSizeGB == nil {
		d.DiskSizeGB = to.Ptr(defaultOSDiskSizeGB(*d.OSType))
	}
}

// UniformOSDiskName is the OS disk name of a Uniform instance as CRP gives it:
// "<scale set>_<instance name>_OS__1_<32 hex digits>".
func UniformOSDiskName(scaleSet, instanceName, unique string) string {
	return scaleSet + "_" + instanceName + "_OS__1_" + strings.ReplaceAll(unique, "-", "")
}
