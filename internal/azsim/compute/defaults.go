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
	if !flex && p.DoNotRunExtensionsOnOverprovisionedVMs == nil {
		p.DoNotRunExtensionsOnOverprovisionedVMs = to.Ptr(false)
	}
	if up := p.UpgradePolicy; up != nil && up.AutomaticOSUpgradePolicy != nil && up.AutomaticOSUpgradePolicy.UseRollingUpgradePolicy == nil {
		up.AutomaticOSUpgradePolicy.UseRollingUpgradePolicy = to.Ptr(false)
	}
	DefaultNICConfigs(scaleSetNICConfigs(ss))
	if prof := p.VirtualMachineProfile; prof != nil {
		if sp := prof.StorageProfile; sp != nil && sp.OSDisk == nil && sp.ImageReference != nil && ss.SKU != nil {
			sp.OSDisk = defaultScaleSetOSDisk(str(ss.SKU.Name))
		}
		DefaultScaleSetOSDisk(prof.StorageProfile)
		DefaultScaleSetOSProfile(prof.OSProfile, prof.StorageProfile)
		if prof.TimeCreated == nil {
			prof.TimeCreated = p.TimeCreated
		}
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

// DefaultVMOSProfile fills what CRP returns in a VM's OS profile and drops what it never
// returns (the admin password, custom data): no secrets, extension operations allowed, a
// guest provisioning signal required and, for a Windows OS disk without a Linux
// configuration, the Windows configuration CRP picks.
func DefaultVMOSProfile(p *armcompute.OSProfile, sp *armcompute.StorageProfile) {
	if p == nil {
		return
	}
	p.AdminPassword, p.CustomData = nil, nil
	defaultOSProfileCommon(&p.Secrets, &p.AllowExtensionOperations, &p.RequireGuestProvisionSignal)
	if p.LinuxConfiguration != nil || sp == nil || sp.OSDisk == nil || !isWindows(sp.OSDisk.OSType) {
		return
	}
	if p.WindowsConfiguration == nil {
		p.WindowsConfiguration = &armcompute.WindowsConfiguration{}
	}
	wc := p.WindowsConfiguration
	defaultWindowsAgent(&wc.ProvisionVMAgent, &wc.EnableAutomaticUpdates)
	if wc.PatchSettings == nil {
		wc.PatchSettings = &armcompute.PatchSettings{}
	}
	if wc.PatchSettings.PatchMode == nil {
		wc.PatchSettings.PatchMode = to.Ptr(armcompute.WindowsVMGuestPatchModeAutomaticByOS)
	}
	if wc.PatchSettings.AssessmentMode == nil {
		wc.PatchSettings.AssessmentMode = to.Ptr(armcompute.WindowsPatchAssessmentModeImageDefault)
	}
	if wc.EnableVMAgentPlatformUpdates == nil {
		wc.EnableVMAgentPlatformUpdates = to.Ptr(true)
	}
}

// DefaultScaleSetOSProfile is DefaultVMOSProfile for a scale set model, whose Windows
// configuration CRP fills with the agent settings only.
func DefaultScaleSetOSProfile(p *armcompute.VirtualMachineScaleSetOSProfile, sp *armcompute.VirtualMachineScaleSetStorageProfile) {
	if p == nil {
		return
	}
	p.AdminPassword, p.CustomData = nil, nil
	defaultOSProfileCommon(&p.Secrets, &p.AllowExtensionOperations, &p.RequireGuestProvisionSignal)
	if p.LinuxConfiguration != nil || sp == nil || sp.OSDisk == nil || !isWindows(sp.OSDisk.OSType) {
		return
	}
	if p.WindowsConfiguration == nil {
		p.WindowsConfiguration = &armcompute.WindowsConfiguration{}
	}
	defaultWindowsAgent(&p.WindowsConfiguration.ProvisionVMAgent, &p.WindowsConfiguration.EnableAutomaticUpdates)
}

// defaultOSProfileCommon fills what CRP returns in every OS profile, a VM's or a scale set's.
func defaultOSProfileCommon(secrets *[]*armcompute.VaultSecretGroup, allowExtensionOperations, requireGuestProvisionSignal **bool) {
	if *secrets == nil {
		*secrets = []*armcompute.VaultSecretGroup{}
	}
	if *allowExtensionOperations == nil {
		*allowExtensionOperations = to.Ptr(true)
	}
	if *requireGuestProvisionSignal == nil {
		*requireGuestProvisionSignal = to.Ptr(true)
	}
}

func isWindows(t *armcompute.OperatingSystemTypes) bool {
	return t != nil && *t == armcompute.OperatingSystemTypesWindows
}

func defaultWindowsAgent(provisionVMAgent, enableAutomaticUpdates **bool) {
	if *provisionVMAgent == nil {
		*provisionVMAgent = to.Ptr(true)
	}
	if *enableAutomaticUpdates == nil {
		*enableAutomaticUpdates = to.Ptr(true)
	}
}

// InstanceOSProfile is the OS profile of a Uniform instance: its computer name with what the
// scale set model's profile says of the admin, secrets, extensions, provisioning signal and OS
// configuration.
func InstanceOSProfile(computerName string, model *armcompute.VirtualMachineScaleSetOSProfile) *armcompute.OSProfile {
	p := &armcompute.OSProfile{ComputerName: to.Ptr(computerName)}
	if model == nil {
		return p
	}
	m := Clone(model)
	p.AdminUsername, p.Secrets, p.AllowExtensionOperations, p.RequireGuestProvisionSignal = m.AdminUsername, m.Secrets, m.AllowExtensionOperations, m.RequireGuestProvisionSignal
	p.WindowsConfiguration, p.LinuxConfiguration = m.WindowsConfiguration, m.LinuxConfiguration
	return p
}

// defaultScaleSetOSDisk is the OS disk CRP gives a scale set model created from an image
// without one: read-only caching none, on premium storage when the size supports it.
func defaultScaleSetOSDisk(size string) *armcompute.VirtualMachineScaleSetOSDisk {
	storage := armcompute.StorageAccountTypesStandardLRS
	if PremiumStorageSize(size) {
		storage = armcompute.StorageAccountTypesPremiumLRS
	}
	return &armcompute.VirtualMachineScaleSetOSDisk{
		CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
		Caching:      to.Ptr(armcompute.CachingTypesNone),
		ManagedDisk:  &armcompute.VirtualMachineScaleSetManagedDiskParameters{StorageAccountType: to.Ptr(storage)},
	}
}

// PremiumStorageSize says whether a VM size supports premium storage, by Azure's naming
// convention: an "s" among the additive features after the vCPU count (Standard_D2s_v3,
// Standard_E4ads_v5) or a family ending in S (Standard_DS2_v2, Standard_GS5).
func PremiumStorageSize(size string) bool {
	name, ok := strings.CutPrefix(strings.ToLower(size), "standard_")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, "_")
	i := strings.IndexFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
	if i <= 0 {
		return false
	}
	family, rest := name[:i], strings.TrimLeft(name[i:], "0123456789")
	return strings.HasSuffix(family, "s") || strings.Contains(rest, "s")
}
