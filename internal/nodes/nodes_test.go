package nodes

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseProviderID(t *testing.T) {
	cases := []struct {
		in      string
		want    ProviderID
		wantErr bool
		format  string
	}{
		{in: "azure:///subscriptions/sub/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-0",
			want:   ProviderID{Kind: KindVM, SubscriptionID: "sub", ResourceGroup: "rg", Name: "vm-0"},
			format: "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-0"},
		{in: "AZURE:///SUBSCRIPTIONS/sub/RESOURCEGROUPS/rg/PROVIDERS/microsoft.compute/VIRTUALMACHINESCALESETS/ss/VirtualMachines/12",
			want:   ProviderID{Kind: KindScaleSetVM, SubscriptionID: "sub", ResourceGroup: "rg", ScaleSet: "ss", InstanceID: "12"},
			format: "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/12"},
		{in: "azure://onprem-1", want: ProviderID{Kind: KindUnmanaged, Name: "onprem-1"}, format: "azure://onprem-1"},
		{in: "aws:///i-123", wantErr: true},
		{in: "azure://", wantErr: true},
		{in: "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb", wantErr: true},
		{in: "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/", wantErr: true},
		{in: "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss", wantErr: true},
		{in: "azure:///subscriptions//resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/x", wantErr: true},
	}
	for _, tc := range cases {
		got, err := ParseProviderID(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: want error, got %+v", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v %v want %+v", tc.in, got, err, tc.want)
			continue
		}
		if got.String() != tc.format {
			t.Errorf("%s: formats as %s want %s", tc.in, got.String(), tc.format)
		}
		if back, err := ParseProviderID(got.String()); err != nil || back != got {
			t.Errorf("%s: round trip %+v %v", tc.in, back, err)
		}
	}
	if id, err := ProviderIDToVMID("azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/v"); err != nil ||
		id != "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v" {
		t.Errorf("ProviderIDToVMID: %s %v", id, err)
	}
	if _, err := ProviderIDToVMID("azure://onprem"); err == nil {
		t.Error("on-prem provider ID has no VM ID")
	}
}

func TestZone(t *testing.T) {
	fd := func(i int32) *int32 { return &i }
	cases := []struct {
		loc       string
		zones     []string
		fd        *int32
		zone, reg string
		wantErr   bool
	}{
		{"EastUS2", []string{"1"}, fd(0), "eastus2-1", "eastus2", false},
		{"East US 2", []string{"3"}, nil, "eastus2-3", "eastus2", false},
		{"westeurope", nil, fd(2), "2", "westeurope", false},
		{"westeurope", []string{}, fd(0), "0", "westeurope", false},
		{"westeurope", nil, nil, "", "westeurope", false},
		{"westeurope", []string{"a"}, nil, "", "westeurope", true},
		{"westeurope", []string{"-2"}, nil, "", "westeurope", true},
		{"westeurope", []string{"+2"}, nil, "", "westeurope", true},
		{"", []string{"2"}, nil, "", "", true},
		{"westeurope", nil, fd(-2), "", "westeurope", true},
		{"west/europe", nil, fd(1), "", "", true},
		{"", nil, fd(1), "1", "", false},
	}
	for _, tc := range cases {
		z, r, err := Zone(tc.loc, tc.zones, tc.fd)
		if (err != nil) != tc.wantErr || z != tc.zone || r != tc.reg {
			t.Errorf("%+v: got %q %q %v", tc, z, r, err)
		}
	}
	if ZoneID("eastus2-1", "eastus2") != "1" || ZoneID("1", "eastus2") != "" || ZoneID("westus-1", "eastus2") != "" {
		t.Error("ZoneID")
	}
}

func node(name string, labels map[string]string, providerID string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

func TestExclusionAndUnmanaged(t *testing.T) {
	cases := []struct {
		n         *v1.Node
		unmanaged bool
		excluded  bool
	}{
		{node("a", nil, ""), false, false},
		{node("b", map[string]string{LabelManaged: "False"}, ""), true, true},
		{node("c", map[string]string{LabelManaged: "true"}, ""), false, false},
		{node("d", map[string]string{LabelResourceGroup: "other-rg"}, ""), false, true},
		{node("e", map[string]string{LabelResourceGroup: "RG"}, ""), false, false},
		{node("f", map[string]string{v1.LabelNodeExcludeBalancers: ""}, ""), false, true},
		{node("g", map[string]string{LabelExcludeBalancerAlpha: "true"}, ""), false, true},
		{node("h", map[string]string{LabelExcludeBalancerAlpha: "false"}, ""), false, false},
		{node("i", nil, "azure://i"), true, true},
		{node("j", nil, "kwok://j"), true, true},
	}
	for _, tc := range cases {
		if got := IsUnmanaged(tc.n); got != tc.unmanaged {
			t.Errorf("%s: unmanaged=%v", tc.n.Name, got)
		}
		if got := IsExcludedFromLB(tc.n, "rg"); got != tc.excluded {
			t.Errorf("%s: excluded=%v (%s)", tc.n.Name, got, ExclusionReason(tc.n, "rg"))
		}
	}
	if ResourceGroupOf(node("x", map[string]string{LabelResourceGroup: "Other"}, ""), "rg") != "other" ||
		ResourceGroupOf(node("x", nil, ""), "RG") != "rg" {
		t.Error("ResourceGroupOf")
	}
	m := NewNodeMap()
	m.Set(node("a", map[string]string{LabelResourceGroup: "RG2"}, ""))
	m.Set(node("b", map[string]string{LabelManaged: "false"}, ""))
	if got := m.ResourceGroups("rg"); len(got) != 2 || got[0] != "rg" || got[1] != "rg2" {
		t.Errorf("ResourceGroups: %v", got)
	}
	if !m.IsUnmanaged("b") || m.IsUnmanaged("a") || m.ResourceGroupOf("a", "rg") != "rg2" {
		t.Error("node map lookups")
	}
	m.Delete("a")
	if _, ok := m.Get("a"); ok {
		t.Error("delete")
	}
}

func TestInstanceFromVMAndScaleSetVM(t *testing.T) {
	vm := &armcompute.VirtualMachine{
		ID:       to.Ptr("/subscriptions/sub/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/flex-1"),
		Name:     to.Ptr("flex-1"),
		Location: to.Ptr("eastus"),
		Zones:    []*string{to.Ptr("2")},
		Properties: &armcompute.VirtualMachineProperties{
			VirtualMachineScaleSet: &armcompute.SubResource{ID: to.Ptr("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/flexpool")},
			HardwareProfile:        &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
			OSProfile:              &armcompute.OSProfile{ComputerName: to.Ptr("flex-1")},
			ProvisioningState:      to.Ptr("Succeeded"),
			InstanceView: &armcompute.VirtualMachineInstanceView{Statuses: []*armcompute.InstanceViewStatus{
				{Code: to.Ptr("ProvisioningState/succeeded")}, {Code: to.Ptr("PowerState/deallocated")}}},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{
				{ID: to.Ptr("nic-2")}, {ID: to.Ptr("nic-1"), Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(true)}}}},
		},
	}
	inst := InstanceFromVM(vm, "sub")
	if inst.VMSet.Kind != VMSetScaleSetFlex || inst.VMSet.Name != "flexpool" || inst.VMSize != "Standard_D2s_v3" ||
		!inst.IsShutdown() || inst.NICIDs[0] != "nic-1" || inst.ProviderID.String() != "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/flex-1" {
		t.Fatalf("flex VM: %+v", inst)
	}
	if z, r, _ := inst.Zone(); z != "eastus-2" || r != "eastus" {
		t.Fatalf("zone %s %s", z, r)
	}
	vm.Properties.VirtualMachineScaleSet = nil
	vm.Properties.AvailabilitySet = &armcompute.SubResource{ID: to.Ptr("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/availabilitySets/as1")}
	vm.Properties.InstanceView.Statuses[1].Code = to.Ptr("PowerState/running")
	vm.Zones = nil
	vm.Properties.InstanceView.PlatformFaultDomain = to.Ptr[int32](1)
	inst = InstanceFromVM(vm, "sub")
	if inst.VMSet.Kind != VMSetAvailabilitySet || inst.VMSet.Name != "as1" || inst.IsShutdown() {
		t.Fatalf("avset VM: %+v", inst)
	}
	if z, _, _ := inst.Zone(); z != "1" {
		t.Fatalf("fault domain zone %q", z)
	}
	// A VM being updated is not reported shut down even if stopped.
	vm.Properties.ProvisioningState = to.Ptr("Updating")
	vm.Properties.InstanceView.Statuses[1].Code = to.Ptr("PowerState/stopped")
	if upd := InstanceFromVM(vm, "sub"); upd.IsShutdown() {
		t.Fatal("updating VM reported shut down")
	}

	ssvm := &armcompute.VirtualMachineScaleSetVM{
		ID:         to.Ptr("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/7"),
		InstanceID: to.Ptr("7"), Location: to.Ptr("eastus"), SKU: &armcompute.SKU{Name: to.Ptr("Standard_D4s_v3")},
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{
			OSProfile:    &armcompute.OSProfile{ComputerName: to.Ptr("pool000007")},
			InstanceView: &armcompute.VirtualMachineScaleSetVMInstanceView{PlatformFaultDomain: to.Ptr[int32](0), Statuses: []*armcompute.InstanceViewStatus{{Code: to.Ptr("PowerState/stopped")}}},
		},
	}
	inst = InstanceFromScaleSetVM(ssvm, "rg", "pool", "sub")
	if inst.VMSet.Kind != VMSetScaleSetUniform || inst.VMSize != "Standard_D4s_v3" || !inst.IsShutdown() || inst.ComputerName != "pool000007" ||
		inst.ProviderID.String() != "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/7" {
		t.Fatalf("vmss VM: %+v", inst)
	}
	if z, _, _ := inst.Zone(); z != "0" {
		t.Fatalf("zone %q", z)
	}
}

func TestIPConfigurationsOrder(t *testing.T) {
	nic := &armnetwork.Interface{ID: to.Ptr("nic"), Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{
		{ID: to.Ptr("nic/ipConfigurations/v6"), Name: to.Ptr("v6"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("fd00::5")}},
		{ID: to.Ptr("nic/ipConfigurations/v4"), Name: to.Ptr("v4"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
			Primary: to.Ptr(true), PrivateIPAddress: to.Ptr("10.0.0.5"), PrivateIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4),
			PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr("pip")}}},
	}}}
	got := ipConfigurationsOf(nic)
	if len(got) != 2 || got[0].Name != "v4" || !got[0].Primary || got[0].PublicIPID != "pip" || got[0].IPv6 || !got[1].IPv6 || got[1].NICID != "nic" {
		t.Fatalf("%+v", got)
	}
}
