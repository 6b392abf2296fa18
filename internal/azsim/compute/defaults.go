package compute

import (
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
