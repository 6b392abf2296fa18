package compute

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

const (
	testSSID   = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss"
	testSubnet = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a"
	testPool   = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/k/backendAddressPools/k"
)

func testScaleSet() *armcompute.VirtualMachineScaleSet {
	return &armcompute.VirtualMachineScaleSet{
		Name:     to.Ptr("ss"),
		Location: to.Ptr("eastus"),
		Tags:     map[string]*string{"k": to.Ptr("v")},
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Tier: to.Ptr("Standard"), Capacity: to.Ptr[int64](2)},
		Zones:    []*string{to.Ptr("1"), to.Ptr("2")},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr("node"), AdminUsername: to.Ptr("azure")},
				StorageProfile: &armcompute.VirtualMachineScaleSetStorageProfile{
					ImageReference: &armcompute.ImageReference{Offer: to.Ptr("ubuntu")},
					OSDisk:         &armcompute.VirtualMachineScaleSetOSDisk{DiskSizeGB: to.Ptr[int32](30)},
				},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr("nic0"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary: to.Ptr(true),
							IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
								Name: to.Ptr("ipc0"),
								Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
									Subnet:                          &armcompute.APIEntityReference{ID: to.Ptr(testSubnet)},
									LoadBalancerBackendAddressPools: []*armcompute.SubResource{{ID: to.Ptr(testPool)}},
								},
							}},
						},
					}},
				},
			},
		},
	}
}

func TestNewUniformInstance(t *testing.T) {
	ss := testScaleSet()
	vm := NewUniformInstance(ss, testSSID, Placement{ID: 11, Zone: "2", FaultDomain: 0}, "guid", time.Unix(0, 0))
	if got := *vm.ID; got != testSSID+"/virtualMachines/11" {
		t.Errorf("id %s", got)
	}
	if *vm.Name != "ss_11" || *vm.InstanceID != "11" || *vm.Type != TypeVMSSVM {
		t.Errorf("name/instance/type: %s %s %s", *vm.Name, *vm.InstanceID, *vm.Type)
	}
	if *vm.Properties.OSProfile.ComputerName != "node00000b" {
		t.Errorf("computer name %s", *vm.Properties.OSProfile.ComputerName)
	}
	if len(vm.Zones) != 1 || *vm.Zones[0] != "2" || *vm.SKU.Name != "Standard_D2s_v3" || *vm.Tags["k"] != "v" {
		t.Errorf("zones/sku/tags: %+v", vm)
	}
	if sp := vm.Properties.StorageProfile; sp.ImageReference == nil || *sp.ImageReference.Offer != "ubuntu" || *sp.OSDisk.DiskSizeGB != 30 {
		t.Errorf("storage profile not taken from the model: %+v", sp)
	}
	nics := vm.Properties.NetworkProfile.NetworkInterfaces
	if len(nics) != 1 || *nics[0].ID != testSSID+"/virtualMachines/11/networkInterfaces/nic0" || !*nics[0].Properties.Primary {
		t.Errorf("network profile: %+v", nics)
	}
	// The instance must not alias the scale set model.
	vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations[0].Name = to.Ptr("changed")
	if *ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Name != "nic0" {
		t.Error("instance aliases the scale set model")
	}
}

func TestUniformNICs(t *testing.T) {
	vm := NewUniformInstance(testScaleSet(), testSSID, Placement{ID: 0, Zone: "1"}, "guid", time.Unix(0, 0))
	vm.Etag = to.Ptr(`"3"`)
	nics := UniformNICs(vm, map[string]string{IPKey("nic0", "ipc0"): "10.0.0.4"})
	if len(nics) != 1 {
		t.Fatalf("nics: %d", len(nics))
	}
	n := nics[0]
	if *n.ID != testSSID+"/virtualMachines/0/networkInterfaces/nic0" || !*n.Properties.Primary || *n.Properties.VirtualMachine.ID != *vm.ID {
		t.Errorf("nic: %+v", n)
	}
	ipcs := n.Properties.IPConfigurations
	if len(ipcs) != 1 {
		t.Fatalf("ipconfigs: %d", len(ipcs))
	}
	ipc := ipcs[0]
	if *ipc.ID != *n.ID+"/ipConfigurations/ipc0" || *ipc.Properties.PrivateIPAddress != "10.0.0.4" || !*ipc.Properties.Primary {
		t.Errorf("ipconfig: %+v", ipc.Properties)
	}
	if len(ipc.Properties.LoadBalancerBackendAddressPools) != 1 || *ipc.Properties.LoadBalancerBackendAddressPools[0].ID != testPool {
		t.Errorf("pools: %+v", ipc.Properties.LoadBalancerBackendAddressPools)
	}
	if *ipc.Properties.Subnet.ID != testSubnet {
		t.Errorf("subnet: %v", *ipc.Properties.Subnet.ID)
	}
}

func TestScaleSetIPConfigsPrimary(t *testing.T) {
	ss := testScaleSet()
	nics := ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations
	nics[0].Properties.IPConfigurations = append(nics[0].Properties.IPConfigurations, &armcompute.VirtualMachineScaleSetIPConfiguration{
		Name: to.Ptr("v6"),
		Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
			PrivateIPAddressVersion: to.Ptr(armcompute.IPVersionIPv6),
		},
	})
	nics[0].Properties.IPConfigurations[0].Properties.Primary = to.Ptr(true)
	refs := ScaleSetIPConfigs(nics)
	if len(refs) != 2 || !refs[0].Primary || refs[1].Primary || !refs[1].IPv6 || refs[0].IPv6 {
		t.Errorf("refs: %+v", refs)
	}
	if refs[0].SubnetID != testSubnet || len(refs[0].Pools) != 1 {
		t.Errorf("ref 0: %+v", refs[0])
	}
}

func TestFlexVMAndNIC(t *testing.T) {
	ss := testScaleSet()
	ss.Properties.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeFlexible)
	if !IsFlexible(ss) || IsFlexible(testScaleSet()) {
		t.Error("IsFlexible")
	}
	vmID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/ss_0000000a"
	nicID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/ss_0000000a-nic"
	vm := NewFlexVM(ss, testSSID, vmID, "ss_0000000a", "1", nicID, "g", time.Unix(0, 0))
	if *vm.Properties.VirtualMachineScaleSet.ID != testSSID || *vm.Properties.NetworkProfile.NetworkInterfaces[0].ID != nicID {
		t.Errorf("flex vm refs: %+v", vm.Properties)
	}
	if *vm.Properties.OSProfile.ComputerName != "node0000000a" || *vm.Zones[0] != "1" {
		t.Errorf("flex vm name/zone: %s %v", *vm.Properties.OSProfile.ComputerName, vm.Zones)
	}
	nic := FlexNIC(ss, nicID, vmID)
	ipcs := nic.Properties.IPConfigurations
	if len(ipcs) != 1 || *ipcs[0].Name != "ipc0" || *ipcs[0].Properties.Subnet.ID != testSubnet || *nic.Properties.VirtualMachine.ID != vmID {
		t.Errorf("flex nic: %+v", nic.Properties)
	}
}

func TestInstanceViews(t *testing.T) {
	iv := VMInstanceView("n", PowerDeallocated, 2, 3)
	if *iv.Statuses[1].Code != "PowerState/deallocated" || *iv.PlatformFaultDomain != 2 || *iv.PlatformUpdateDomain != 3 || *iv.ComputerName != "n" {
		t.Errorf("vm instance view: %+v", iv)
	}
	siv := VMSSVMInstanceView("", PowerRunning, 0, 0)
	if *siv.Statuses[1].Code != "PowerState/running" || siv.ComputerName != nil {
		t.Errorf("vmss vm instance view: %+v", siv)
	}
}

func TestScaleSetInstanceView(t *testing.T) {
	iv := ScaleSetInstanceView([]PowerState{PowerRunning, PowerDeallocated, PowerRunning, ""})
	got := map[string]int32{}
	for _, c := range iv.VirtualMachine.StatusesSummary {
		got[*c.Code] = *c.Count
	}
	if len(got) != 2 || got["PowerState/running"] != 2 || got["PowerState/deallocated"] != 1 {
		t.Errorf("summary: %v", got)
	}
	if len(iv.Statuses) != 1 || *iv.Statuses[0].Code != "ProvisioningState/succeeded" {
		t.Errorf("statuses: %+v", iv.Statuses)
	}
	if empty := ScaleSetInstanceView(nil); empty.VirtualMachine.StatusesSummary == nil {
		t.Error("an empty scale set must still have a (empty) summary list")
	}
}
