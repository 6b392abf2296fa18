package compute

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

func TestDefaultScaleSet(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*armcompute.VirtualMachineScaleSet)
		wantFD      int32
		wantSPG     bool
		wantUpgrade bool
	}{
		{"zonal uniform", func(*armcompute.VirtualMachineScaleSet) {}, 1, true, true},
		{"regional uniform", func(ss *armcompute.VirtualMachineScaleSet) { ss.Zones = nil }, 5, true, true},
		{"flexible", func(ss *armcompute.VirtualMachineScaleSet) {
			ss.Properties.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeFlexible)
		}, 1, false, false},
		{"explicit values win", func(ss *armcompute.VirtualMachineScaleSet) {
			ss.Properties.PlatformFaultDomainCount = to.Ptr[int32](3)
			ss.Properties.SinglePlacementGroup = to.Ptr(false)
		}, 3, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := testScaleSet()
			ss.SKU.Tier = nil
			tt.mutate(ss)
			DefaultScaleSet(ss)
			p := ss.Properties
			if *ss.SKU.Tier != "Standard" || *p.PlatformFaultDomainCount != tt.wantFD || *p.SinglePlacementGroup != tt.wantSPG ||
				(p.UpgradePolicy != nil) != tt.wantUpgrade || p.OrchestrationMode == nil {
				t.Errorf("defaults: tier %v fd %v spg %v upgrade %v mode %v", *ss.SKU.Tier, *p.PlatformFaultDomainCount, *p.SinglePlacementGroup, p.UpgradePolicy, p.OrchestrationMode)
			}
			before, _ := json.Marshal(ss)
			DefaultScaleSet(ss)
			if after, _ := json.Marshal(ss); string(after) != string(before) {
				t.Error("defaults are not idempotent")
			}
			ipc := p.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties
			if *ipc.IPConfigurations[0].Properties.PrivateIPAddressVersion != armcompute.IPVersionIPv4 || *ipc.EnableAcceleratedNetworking {
				t.Errorf("nic defaults: %+v", ipc)
			}
		})
	}
}

func TestDefaultDisk(t *testing.T) {
	d := &armcompute.Disk{Properties: &armcompute.DiskProperties{PublicNetworkAccess: to.Ptr(armcompute.PublicNetworkAccessDisabled)}}
	DefaultDisk(d)
	p := d.Properties
	if *p.PublicNetworkAccess != armcompute.PublicNetworkAccessDisabled || *p.NetworkAccessPolicy != armcompute.NetworkAccessPolicyAllowAll ||
		*p.Encryption.Type != armcompute.EncryptionTypeEncryptionAtRestWithPlatformKey || *p.DiskIOPSReadWrite != 500 {
		t.Errorf("disk defaults: %+v", p)
	}
}

func TestPremiumStorageSize(t *testing.T) {
	for size, want := range map[string]bool{
		"Standard_D2s_v3": true, "Standard_E4ads_v5": true, "Standard_DS2_v2": true, "Standard_GS5": true, "Standard_B2ms": true,
		"Standard_D2_v3": false, "Standard_A2_v2": false, "Standard_F4": false, "Basic_A1": false, "": false, "Standard_": false,
	} {
		if got := PremiumStorageSize(size); got != want {
			t.Errorf("PremiumStorageSize(%q) = %v, want %v", size, got, want)
		}
	}
}

func TestDefaultVMOSProfile(t *testing.T) {
	windows := &armcompute.StorageProfile{OSDisk: &armcompute.OSDisk{OSType: to.Ptr(armcompute.OperatingSystemTypesWindows)}}
	p := &armcompute.OSProfile{AdminUsername: to.Ptr("u"), AdminPassword: to.Ptr("secret"), CustomData: to.Ptr("x")}
	DefaultVMOSProfile(p, windows)
	wc := p.WindowsConfiguration
	if p.AdminPassword != nil || p.CustomData != nil || p.Secrets == nil || !*p.AllowExtensionOperations || !*p.RequireGuestProvisionSignal ||
		wc == nil || !*wc.ProvisionVMAgent || *wc.PatchSettings.PatchMode != armcompute.WindowsVMGuestPatchModeAutomaticByOS {
		t.Errorf("Windows profile: %+v", p)
	}
	before, _ := json.Marshal(p)
	DefaultVMOSProfile(p, windows)
	if after, _ := json.Marshal(p); string(after) != string(before) {
		t.Error("defaults are not idempotent")
	}
	linux := &armcompute.OSProfile{}
	DefaultVMOSProfile(linux, &armcompute.StorageProfile{OSDisk: &armcompute.OSDisk{OSType: to.Ptr(armcompute.OperatingSystemTypesLinux)}})
	if linux.WindowsConfiguration != nil || linux.Secrets == nil {
		t.Errorf("Linux profile: %+v", linux)
	}
}

// A scale set model created from an image without an OS disk gets CRP's, and its instances
// take the model's OS profile and disk settings.
func TestScaleSetOSDefaultsReachInstances(t *testing.T) {
	ss := testScaleSet()
	ss.SKU.Name = to.Ptr("Standard_D2s_v3")
	ss.Properties.VirtualMachineProfile.StorageProfile = &armcompute.VirtualMachineScaleSetStorageProfile{
		ImageReference: &armcompute.ImageReference{Publisher: to.Ptr("MicrosoftWindowsServer"), Offer: to.Ptr("WindowsServer")}}
	ss.Properties.VirtualMachineProfile.OSProfile = &armcompute.VirtualMachineScaleSetOSProfile{AdminUsername: to.Ptr("u"), AdminPassword: to.Ptr("p")}
	DefaultScaleSet(ss)
	prof := ss.Properties.VirtualMachineProfile
	d := prof.StorageProfile.OSDisk
	if d == nil || *d.Caching != armcompute.CachingTypesNone || *d.ManagedDisk.StorageAccountType != armcompute.StorageAccountTypesPremiumLRS ||
		*d.OSType != armcompute.OperatingSystemTypesWindows || prof.OSProfile.AdminPassword != nil || prof.OSProfile.WindowsConfiguration == nil {
		t.Fatalf("model: disk %+v, profile %+v", d, prof.OSProfile)
	}
	vm := NewUniformInstance(ss, "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss", Placement{ID: 3}, "00000000-0000-0000-0000-000000000001", time.Now())
	op, od := vm.Properties.OSProfile, vm.Properties.StorageProfile.OSDisk
	if str(op.AdminUsername) != "u" || op.WindowsConfiguration == nil || op.Secrets == nil || *od.Caching != armcompute.CachingTypesNone ||
		*od.ManagedDisk.StorageAccountType != armcompute.StorageAccountTypesPremiumLRS {
		t.Errorf("instance: profile %+v, disk %+v", op, od)
	}
}
