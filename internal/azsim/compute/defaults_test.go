package compute

import (
	"encoding/json"
	"testing"

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
