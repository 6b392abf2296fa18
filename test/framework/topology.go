package framework

import (
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// DefaultTopology is a small cluster estate: one resource group, a VNet whose node subnet has
// an NSG and a route table, and a Uniform scale set of three instances across three zones.
func DefaultTopology() *topology.Topology {
	const rg = "rg-cluster"
	return &topology.Topology{
		Location:       topology.DefaultLocation,
		ResourceGroups: []string{rg},
		VirtualNetworks: []topology.VirtualNetwork{{
			ResourceGroup:   rg,
			Name:            "vnet-cluster",
			AddressPrefixes: []string{"10.240.0.0/16"},
			Subnets: []topology.Subnet{{
				Name: "nodes", AddressPrefix: "10.240.0.0/20",
				NetworkSecurityGroup: "nsg-nodes", RouteTable: "rt-nodes",
			}},
		}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: rg, Name: "nsg-nodes"}},
		RouteTables:           []topology.Named{{ResourceGroup: rg, Name: "rt-nodes"}},
		ScaleSets: []topology.ScaleSet{{
			ResourceGroup: rg, Name: "pool0", Capacity: 3, Zones: []string{"1", "2", "3"},
		}},
	}
}

// azureDefaults fills the azure.json defaults of a from the (normalized) topology: the first
// VNet and subnet, the subnet's NSG and route table, the VM type its machines call for.
func azureDefaults(a *Azure, t *topology.Topology) {
	a.SubscriptionID, a.Location = t.SubscriptionID, t.Location
	if len(t.ResourceGroups) > 0 {
		a.ResourceGroup = t.ResourceGroups[0]
	}
	if len(t.VirtualNetworks) > 0 {
		v := t.VirtualNetworks[0]
		a.VnetName, a.VnetResourceGroup = v.Name, v.ResourceGroup
		if len(v.Subnets) > 0 {
			a.SubnetName = v.Subnets[0].Name
			a.SecurityGroupName = v.Subnets[0].NetworkSecurityGroup
			a.RouteTableName = v.Subnets[0].RouteTable
		}
	}
	a.VMType = "standard"
	if len(t.ScaleSets) > 0 {
		a.VMType = "vmss"
		a.PrimaryScaleSetName = t.ScaleSets[0].Name
		if strings.EqualFold(t.ScaleSets[0].Orchestration, "Flexible") {
			a.VMType = "vmssflex"
		}
	}
}
