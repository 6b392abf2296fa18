package compute

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

func TestMergeJSON(t *testing.T) {
	tests := []struct {
		name, base, patch, want string
	}{
		{"add key", `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
		{"replace scalar", `{"a":1}`, `{"a":"x"}`, `{"a":"x"}`},
		{"nested merge", `{"p":{"x":1,"y":{"z":2}}}`, `{"p":{"y":{"w":3}}}`, `{"p":{"x":1,"y":{"z":2,"w":3}}}`},
		{"array replaced wholesale", `{"l":[1,2,3]}`, `{"l":[4]}`, `{"l":[4]}`},
		{"null deletes", `{"a":1,"b":2}`, `{"a":null}`, `{"b":2}`},
		{"object replaces scalar", `{"a":1}`, `{"a":{"b":null,"c":1}}`, `{"a":{"c":1}}`},
		{"empty patch", `{"a":{"b":1}}`, `{}`, `{"a":{"b":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var base, patch, want map[string]any
			mustUnmarshal(t, tt.base, &base)
			mustUnmarshal(t, tt.patch, &patch)
			mustUnmarshal(t, tt.want, &want)
			if got := MergeJSON(base, patch); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestMergeModelKeepsUnmentionedFields(t *testing.T) {
	existing := &armcompute.VirtualMachineScaleSet{
		Location: to.Ptr("eastus"),
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Capacity: to.Ptr[int64](3)},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr("vmss")},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{Name: to.Ptr("old")}},
				},
			},
		},
	}
	// The partial body the CCM sends to add a pool to the scale set model.
	body := `{"location":"eastus","etag":"\"1\"","properties":{"virtualMachineProfile":{"networkProfile":{"networkInterfaceConfigurations":[{"name":"nic","properties":{"primary":true}}]}}}}`
	got, err := MergeModel(existing, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if *got.SKU.Capacity != 3 || *got.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix != "vmss" {
		t.Errorf("unmentioned fields lost: %+v", got)
	}
	nics := got.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations
	if len(nics) != 1 || *nics[0].Name != "nic" {
		t.Errorf("network interface configurations not replaced: %+v", nics)
	}
	if *existing.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Name != "old" {
		t.Error("existing model was mutated")
	}
	if _, err := MergeModel(existing, []byte(`[1]`)); err == nil {
		t.Error("a non-object body must be refused")
	}
	if _, err := MergeModel(existing, []byte(`{"sku":{"capacity":"many"}}`)); err == nil {
		t.Error("a body of the wrong shape must be refused")
	}
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatal(err)
	}
}
