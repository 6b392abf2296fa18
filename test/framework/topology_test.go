package framework

import (
	"reflect"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

func TestAzureDefaults(t *testing.T) {
	flex := DefaultTopology()
	flex.ScaleSets[0].Orchestration = "Flexible"
	vms := DefaultTopology()
	vms.ScaleSets = nil
	vms.VirtualMachines = []topology.VirtualMachine{{ResourceGroup: "rg-cluster", Name: "vm0"}}
	for _, tc := range []struct {
		name   string
		topo   *topology.Topology
		vmType string
		ss     string
	}{
		{"uniform scale set", DefaultTopology(), "vmss", "pool0"},
		{"flexible scale set", flex, "vmssflex", "pool0"},
		{"standalone VMs", vms, "standard", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.topo.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			var a Azure
			azureDefaults(&a, n)
			if a.VMType != tc.vmType || a.PrimaryScaleSetName != tc.ss {
				t.Errorf("vmType %q primaryScaleSet %q, want %q %q", a.VMType, a.PrimaryScaleSetName, tc.vmType, tc.ss)
			}
			want := Azure{
				SubscriptionID: topology.DefaultSubscriptionID, Location: "eastus", ResourceGroup: "rg-cluster",
				VnetName: "vnet-cluster", VnetResourceGroup: "rg-cluster", SubnetName: "nodes",
				SecurityGroupName: "nsg-nodes", RouteTableName: "rt-nodes",
				VMType: tc.vmType, PrimaryScaleSetName: tc.ss,
			}
			if !reflect.DeepEqual(a, want) {
				t.Errorf("azureDefaults = %+v, want %+v", a, want)
			}
		})
	}
}
