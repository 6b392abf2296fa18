// Package azureid builds and reads Azure resource IDs. Every ID the CCM builds or takes apart
// goes through here, on top of the SDK's parser (azcore/arm.ParseResourceID), so casing,
// child resources and malformed input are handled the same way everywhere.
package azureid

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
)

// Parse parses a resource ID.
func Parse(id string) (*arm.ResourceID, error) {
	return arm.ParseResourceID(id)
}

// Name is the name of the resource the ID names (the last name for a child resource, e.g. the
// pool of …/loadBalancers/lb/backendAddressPools/pool). ARM names never contain "/", so it is
// the last segment; it is read without parsing because planners call it for every rule and
// frontend of big load balancers.
func Name(id string) string {
	id = strings.TrimRight(id, "/")
	return id[strings.LastIndex(id, "/")+1:]
}

// ResourceGroup is the resource group of the ID ("" when it has none or does not parse).
func ResourceGroup(id string) string {
	if r, err := arm.ParseResourceID(id); err == nil {
		return r.ResourceGroupName
	}
	return ""
}

// Parent is the ID of the resource a child resource belongs to (the load balancer of a backend
// pool, the scale set of an instance); "" for a top-level resource or an ID that does not parse.
func Parent(id string) string {
	r, err := arm.ParseResourceID(id)
	if err != nil || r.Parent == nil || r.Parent.ResourceType.Namespace != r.ResourceType.Namespace {
		return ""
	}
	return r.Parent.String()
}

// IsType reports whether id names a resource of the given full type, compared as ARM does
// (case-insensitively), e.g. "Microsoft.Network/loadBalancers/backendAddressPools".
func IsType(id, fullType string) bool {
	r, err := arm.ParseResourceID(id)
	return err == nil && strings.EqualFold(r.ResourceType.String(), fullType)
}

func resource(sub, rg, provider, typ, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/%s/%s/%s", sub, rg, provider, typ, name)
}

// Network resources.

// LoadBalancer is the ID of a load balancer.
func LoadBalancer(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "loadBalancers", name)
}

// LoadBalancerChild is the ID of a child of a load balancer (kind: frontendIPConfigurations,
// backendAddressPools, loadBalancingRules, probes, outboundRules).
func LoadBalancerChild(lbID, kind, name string) string { return lbID + "/" + kind + "/" + name }

// BackendPool is the ID of a backend address pool of the load balancer lbID.
func BackendPool(lbID, name string) string {
	return LoadBalancerChild(lbID, "backendAddressPools", name)
}

// SecurityGroup is the ID of a network security group.
func SecurityGroup(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "networkSecurityGroups", name)
}

// PublicIP is the ID of a public IP address.
func PublicIP(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "publicIPAddresses", name)
}

// VirtualNetwork is the ID of a virtual network.
func VirtualNetwork(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "virtualNetworks", name)
}

// Subnet is the ID of a subnet of a virtual network.
func Subnet(sub, rg, vnet, name string) string {
	return VirtualNetwork(sub, rg, vnet) + "/subnets/" + name
}

// PrivateLinkService is the ID of a private link service.
func PrivateLinkService(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "privateLinkServices", name)
}

// RouteTable is the ID of a route table.
func RouteTable(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "routeTables", name)
}

// NetworkInterface is the ID of a standalone network interface.
func NetworkInterface(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Network", "networkInterfaces", name)
}

// Compute resources.

// VirtualMachine is the ID of a standalone (or Flexible scale set) VM.
func VirtualMachine(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Compute", "virtualMachines", name)
}

// ScaleSet is the ID of a virtual machine scale set.
func ScaleSet(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Compute", "virtualMachineScaleSets", name)
}

// ScaleSetVM is the ID of an instance of a Uniform scale set.
func ScaleSetVM(sub, rg, scaleSet, instanceID string) string {
	return ScaleSet(sub, rg, scaleSet) + "/virtualMachines/" + instanceID
}

// Disk is the ID of a managed disk.
func Disk(sub, rg, name string) string {
	return resource(sub, rg, "Microsoft.Compute", "disks", name)
}
