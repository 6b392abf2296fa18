package topology

import (
	"fmt"
	"strings"
)

// API versions the seed requests use (those of the SDK modules the project builds with).
const (
	ResourcesAPIVersion = "2021-04-01"
	NetworkAPIVersion   = "2025-05-01"
	ComputeAPIVersion   = "2025-04-01"
)

// Request is one ARM call of a seed plan.
type Request struct {
	Method     string
	Path       string // resource ID or action path, without query
	APIVersion string
	Body       map[string]any
}

// ID helpers.
func rgID(sub, rg string) string { return "/subscriptions/" + sub + "/resourceGroups/" + rg }

func resID(sub, rg, typ, name string) string {
	return rgID(sub, rg) + "/providers/" + typ + "/" + name
}

func (t *Topology) subnetID(r SubnetRef) string {
	return resID(t.SubscriptionID, r.ResourceGroup, "Microsoft.Network/virtualNetworks", r.VNet) + "/subnets/" + r.Name
}

// Plan turns a normalized topology into the ARM requests that build it, in dependency order:
// groups, NSGs, route tables, VNets, public IPs, load balancers, private link services,
// private endpoints, availability sets, scale sets, NICs and VMs, then the power actions for
// machines seeded stopped or deallocated.
func Plan(t *Topology) []Request {
	sub := t.SubscriptionID
	var reqs, power []Request
	put := func(path, apiVersion string, body map[string]any) {
		reqs = append(reqs, Request{Method: "PUT", Path: path, APIVersion: apiVersion, Body: body})
	}
	for _, rg := range t.ResourceGroups {
		put(rgID(sub, rg), ResourcesAPIVersion, map[string]any{"location": t.Location})
	}
	for _, n := range t.NetworkSecurityGroups {
		put(resID(sub, n.ResourceGroup, "Microsoft.Network/networkSecurityGroups", n.Name), NetworkAPIVersion,
			map[string]any{"location": t.Location, "properties": map[string]any{}})
	}
	for _, n := range t.RouteTables {
		put(resID(sub, n.ResourceGroup, "Microsoft.Network/routeTables", n.Name), NetworkAPIVersion,
			map[string]any{"location": t.Location, "properties": map[string]any{"disableBgpRoutePropagation": false}})
	}
	for _, v := range t.VirtualNetworks {
		subnets := []any{}
		for _, s := range v.Subnets {
			props := map[string]any{}
			if s.AddressPrefixV6 != "" {
				props["addressPrefixes"] = []string{s.AddressPrefix, s.AddressPrefixV6}
			} else {
				props["addressPrefix"] = s.AddressPrefix
			}
			if s.NetworkSecurityGroup != "" {
				props["networkSecurityGroup"] = map[string]any{"id": resID(sub, v.ResourceGroup, "Microsoft.Network/networkSecurityGroups", s.NetworkSecurityGroup)}
			}
			if s.RouteTable != "" {
				props["routeTable"] = map[string]any{"id": resID(sub, v.ResourceGroup, "Microsoft.Network/routeTables", s.RouteTable)}
			}
			if s.PrivateLinkServiceNetworkPolicies != "" {
				props["privateLinkServiceNetworkPolicies"] = s.PrivateLinkServiceNetworkPolicies
			}
			subnets = append(subnets, map[string]any{"name": s.Name, "properties": props})
		}
		put(resID(sub, v.ResourceGroup, "Microsoft.Network/virtualNetworks", v.Name), NetworkAPIVersion, map[string]any{
			"location": t.Location,
			"properties": map[string]any{
				"addressSpace": map[string]any{"addressPrefixes": v.AddressPrefixes},
				"subnets":      subnets,
			},
		})
	}
	reqs = append(reqs, t.lbRequests()...)
	reqs = append(reqs, t.privateLinkRequests()...)
	for _, a := range t.AvailabilitySets {
		asID := resID(sub, a.ResourceGroup, "Microsoft.Compute/availabilitySets", a.Name)
		put(asID, ComputeAPIVersion, map[string]any{
			"location": t.Location,
			"sku":      map[string]any{"name": "Aligned"},
			"properties": map[string]any{
				"platformFaultDomainCount":  a.FaultDomains,
				"platformUpdateDomainCount": a.UpdateDomains,
			},
		})
		for i := 0; i < a.VMs; i++ {
			vm := VirtualMachine{ResourceGroup: a.ResourceGroup, Name: fmt.Sprintf("%s%d", a.VMNamePrefix, i), VMSize: a.VMSize,
				Subnet: a.Subnet, IPv6: a.IPv6, PowerState: a.PowerState, LoadBalancerPools: a.LoadBalancerPools}
			vm.ComputerName = vm.Name
			reqs = append(reqs, t.vmRequests(vm, asID)...)
			power = append(power, vmPower(sub, vm)...)
		}
	}
	for _, s := range t.ScaleSets {
		id := resID(sub, s.ResourceGroup, "Microsoft.Compute/virtualMachineScaleSets", s.Name)
		put(id, ComputeAPIVersion, t.scaleSetBody(s))
		if s.PowerState != "running" {
			power = append(power, Request{Method: "POST", Path: id + "/" + powerAction(s.PowerState), APIVersion: ComputeAPIVersion})
		}
	}
	for _, v := range t.VirtualMachines {
		reqs = append(reqs, t.vmRequests(v, "")...)
		power = append(power, vmPower(sub, v)...)
	}
	return append(reqs, power...)
}

func powerAction(state string) string {
	if state == "stopped" {
		return "powerOff"
	}
	return "deallocate"
}

func vmPower(sub string, v VirtualMachine) []Request {
	if v.PowerState == "running" {
		return nil
	}
	return []Request{{Method: "POST", Path: resID(sub, v.ResourceGroup, "Microsoft.Compute/virtualMachines", v.Name) + "/" + powerAction(v.PowerState), APIVersion: ComputeAPIVersion}}
}

func ipConfigs(subnetID string, ipv6 bool, nicLevel bool) []any {
	v4 := map[string]any{"primary": true, "privateIPAddressVersion": "IPv4", "subnet": map[string]any{"id": subnetID}}
	if nicLevel {
		v4["privateIPAllocationMethod"] = "Dynamic"
	}
	out := []any{map[string]any{"name": "ipconfig1", "properties": v4}}
	if ipv6 {
		v6 := map[string]any{"primary": false, "privateIPAddressVersion": "IPv6", "subnet": map[string]any{"id": subnetID}}
		if nicLevel {
			v6["privateIPAllocationMethod"] = "Dynamic"
		}
		out = append(out, map[string]any{"name": "ipconfig-v6", "properties": v6})
	}
	return out
}

// withPools makes the primary (IPv4) ip configuration join the pools.
func withPools(configs []any, pools []any) []any {
	if len(pools) > 0 {
		configs[0].(map[string]any)["properties"].(map[string]any)["loadBalancerBackendAddressPools"] = pools
	}
	return configs
}

func (t *Topology) scaleSetBody(s ScaleSet) map[string]any {
	nicConfig := map[string]any{
		"name": s.Name,
		"properties": map[string]any{
			"primary":            true,
			"enableIPForwarding": true,
			"ipConfigurations":   withPools(ipConfigs(t.subnetID(s.Subnet), s.IPv6, false), t.poolRefs(s.LoadBalancerPools)),
		},
	}
	netProfile := map[string]any{"networkInterfaceConfigurations": []any{nicConfig}}
	props := map[string]any{
		"orchestrationMode": s.Orchestration,
		"virtualMachineProfile": map[string]any{
			"osProfile":      map[string]any{"computerNamePrefix": s.ComputerNamePrefix, "adminUsername": "azureuser"},
			"storageProfile": seedStorageProfile(),
			"networkProfile": netProfile,
		},
	}
	if s.Orchestration == "Flexible" {
		netProfile["networkApiVersion"] = "2020-11-01"
		props["platformFaultDomainCount"] = 1
	} else {
		props["upgradePolicy"] = map[string]any{"mode": "Manual"}
		props["overprovision"] = false
		if s.FaultDomains > 0 {
			props["platformFaultDomainCount"] = s.FaultDomains
		}
	}
	body := map[string]any{
		"location":   t.Location,
		"sku":        map[string]any{"name": s.VMSize, "tier": "Standard", "capacity": s.Capacity},
		"properties": props,
	}
	if len(s.Zones) > 0 {
		body["zones"] = s.Zones
	}
	if len(s.Tags) > 0 {
		body["tags"] = s.Tags
	}
	return body
}

// vmRequests creates a VM's NIC and then the VM.
func (t *Topology) vmRequests(v VirtualMachine, availabilitySetID string) []Request {
	sub := t.SubscriptionID
	nicID := resID(sub, v.ResourceGroup, "Microsoft.Network/networkInterfaces", NICName(v.Name))
	nic := Request{Method: "PUT", Path: nicID, APIVersion: NetworkAPIVersion, Body: map[string]any{
		"location": t.Location,
		"properties": map[string]any{
			"enableIPForwarding": true,
			"ipConfigurations":   withPools(ipConfigs(t.subnetID(v.Subnet), v.IPv6, true), t.poolRefs(v.LoadBalancerPools)),
		},
	}}
	props := map[string]any{
		"hardwareProfile": map[string]any{"vmSize": v.VMSize},
		"osProfile":       map[string]any{"computerName": v.ComputerName, "adminUsername": "azureuser"},
		"storageProfile":  seedStorageProfile(),
		"networkProfile": map[string]any{"networkInterfaces": []any{
			map[string]any{"id": nicID, "properties": map[string]any{"primary": true}},
		}},
	}
	if availabilitySetID != "" {
		props["availabilitySet"] = map[string]any{"id": availabilitySetID}
	}
	body := map[string]any{"location": t.Location, "properties": props}
	if v.Zone != "" {
		body["zones"] = []string{v.Zone}
	}
	if len(v.Tags) > 0 {
		body["tags"] = v.Tags
	}
	vm := Request{Method: "PUT", Path: resID(sub, v.ResourceGroup, "Microsoft.Compute/virtualMachines", v.Name), APIVersion: ComputeAPIVersion, Body: body}
	return []Request{nic, vm}
}

// seedStorageProfile is the storage profile of seeded VMs and scale sets: an OS disk from a
// marketplace Linux image, as node pools have. Clients read osType and imageReference.
func seedStorageProfile() map[string]any {
	return map[string]any{
		"imageReference": map[string]any{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"},
		"osDisk": map[string]any{"osType": "Linux", "createOption": "FromImage", "caching": "ReadWrite",
			"managedDisk": map[string]any{"storageAccountType": "Premium_LRS"}},
	}
}

// NICName is the name of the NIC seeded for a standalone or availability-set VM.
func NICName(vm string) string { return vm + "-nic" }

// ProviderID is the Kubernetes providerID of a VM resource ID, with the resource group
// lower-cased as the Azure cloud provider writes it.
func ProviderID(resourceID string) string {
	parts := strings.Split(resourceID, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "resourceGroups") {
			parts[i+1] = strings.ToLower(parts[i+1])
			break
		}
	}
	return "azure://" + strings.Join(parts, "/")
}
