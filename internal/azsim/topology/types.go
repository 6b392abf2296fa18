// Package topology describes the Azure estate azsim starts from (resource groups, networks,
// scale sets, availability sets, VMs), turns it into ordinary ARM requests, seeds an engine
// with them in-process, and reports every machine the way the test framework needs it for
// Kubernetes Nodes.
package topology

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Topology is the seed file (YAML or JSON).
type Topology struct {
	SubscriptionID        string            `json:"subscriptionId"`
	Location              string            `json:"location"`
	ResourceGroups        []string          `json:"resourceGroups,omitempty"`
	VirtualNetworks       []VirtualNetwork  `json:"virtualNetworks,omitempty"`
	NetworkSecurityGroups []Named           `json:"networkSecurityGroups,omitempty"`
	RouteTables           []Named           `json:"routeTables,omitempty"`
	ScaleSets             []ScaleSet        `json:"scaleSets,omitempty"`
	AvailabilitySets      []AvailabilitySet `json:"availabilitySets,omitempty"`
	VirtualMachines       []VirtualMachine  `json:"virtualMachines,omitempty"`
	// PublicIPs and LoadBalancers are created after the networks and before the machines, so
	// machines can join backend pools from creation (as a cluster the Basic mode left behind).
	PublicIPs     []PublicIP     `json:"publicIPs,omitempty"`
	LoadBalancers []LoadBalancer `json:"loadBalancers,omitempty"`
	// PrivateLinkServices (on frontends of LoadBalancers) and PrivateEndpoints (to services of
	// this or any subscription) are created after the load balancers.
	PrivateLinkServices []PrivateLinkService `json:"privateLinkServices,omitempty"`
	PrivateEndpoints    []PrivateEndpoint    `json:"privateEndpoints,omitempty"`
}

// PublicIP is a public IP address (SKU Basic or Standard, default Standard).
type PublicIP struct {
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
	SKU           string `json:"sku,omitempty"`
	// Allocation is Static or Dynamic (default Static).
	Allocation string            `json:"allocation,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// LoadBalancer is a load balancer with frontends, backend pools and rules.
type LoadBalancer struct {
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
	// SKU is Basic or Standard (default Standard).
	SKU       string     `json:"sku,omitempty"`
	Frontends []Frontend `json:"frontends,omitempty"`
	// BackendPools are NIC-based pools: machines name them in loadBalancerPools.
	BackendPools []string `json:"backendPools,omitempty"`
	Rules        []Rule   `json:"rules,omitempty"`
}

// Frontend is public (PublicIP names a public IP of the load balancer's group) or internal
// (Subnet, with PrivateIP for a Static address).
type Frontend struct {
	Name      string     `json:"name"`
	PublicIP  string     `json:"publicIP,omitempty"`
	Subnet    *SubnetRef `json:"subnet,omitempty"`
	PrivateIP string     `json:"privateIP,omitempty"`
}

// Rule is a TCP or UDP load-balancing rule with a TCP probe on the backend port.
type Rule struct {
	Name        string `json:"name"`
	Frontend    string `json:"frontend"`
	BackendPool string `json:"backendPool"`
	Protocol    string `json:"protocol,omitempty"`
	Port        int    `json:"port"`
	BackendPort int    `json:"backendPort,omitempty"`
}

// PoolRef names a backend pool of a load balancer of the topology.
type PoolRef struct {
	ResourceGroup string `json:"resourceGroup,omitempty"`
	LoadBalancer  string `json:"loadBalancer"`
	Pool          string `json:"pool"`
}

// Named is a resource known by its group and name (NSGs, route tables).
type Named struct {
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
}

// VirtualNetwork is a VNet with its subnets.
type VirtualNetwork struct {
	ResourceGroup   string   `json:"resourceGroup"`
	Name            string   `json:"name"`
	AddressPrefixes []string `json:"addressPrefixes"`
	Subnets         []Subnet `json:"subnets,omitempty"`
}

// Subnet is one subnet; AddressPrefixV6 makes it dual-stack.
type Subnet struct {
	Name            string `json:"name"`
	AddressPrefix   string `json:"addressPrefix"`
	AddressPrefixV6 string `json:"addressPrefixV6,omitempty"`
	// NetworkSecurityGroup and RouteTable name resources of the VNet's resource group.
	NetworkSecurityGroup string `json:"networkSecurityGroup,omitempty"`
	RouteTable           string `json:"routeTable,omitempty"`
	// PrivateLinkServiceNetworkPolicies is Enabled (NRP's default) or Disabled (needed for the
	// NAT addresses of a private link service).
	PrivateLinkServiceNetworkPolicies string `json:"privateLinkServiceNetworkPolicies,omitempty"`
}

// SubnetRef points at a subnet. Empty fields default to the machine's resource group and the
// first VNet / subnet of the topology.
type SubnetRef struct {
	ResourceGroup string `json:"resourceGroup,omitempty"`
	VNet          string `json:"vnet,omitempty"`
	Name          string `json:"name,omitempty"`
}

// ScaleSet is a VMSS; capacity instances are created by the compute emulation.
type ScaleSet struct {
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
	// Orchestration is Uniform (default) or Flexible.
	Orchestration      string            `json:"orchestration,omitempty"`
	Capacity           int               `json:"capacity"`
	Zones              []string          `json:"zones,omitempty"`
	VMSize             string            `json:"vmSize,omitempty"`
	Subnet             SubnetRef         `json:"subnet,omitempty"`
	ComputerNamePrefix string            `json:"computerNamePrefix,omitempty"`
	IPv6               bool              `json:"ipv6,omitempty"`
	FaultDomains       int               `json:"faultDomains,omitempty"`
	PowerState         string            `json:"powerState,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	// SubFaultDomain is the platform sub fault domain IMDS shows for every VM of it ("": none).
	SubFaultDomain string `json:"subFaultDomain,omitempty"`
	// LoadBalancerPools the model's primary ip configuration joins (so every instance does).
	LoadBalancerPools []PoolRef `json:"loadBalancerPools,omitempty"`
}

// AvailabilitySet is an availability set with VMs named <vmNamePrefix><i>.
type AvailabilitySet struct {
	ResourceGroup string    `json:"resourceGroup"`
	Name          string    `json:"name"`
	FaultDomains  int       `json:"faultDomains,omitempty"`
	UpdateDomains int       `json:"updateDomains,omitempty"`
	VMs           int       `json:"vms"`
	VMNamePrefix  string    `json:"vmNamePrefix,omitempty"`
	VMSize        string    `json:"vmSize,omitempty"`
	Subnet        SubnetRef `json:"subnet,omitempty"`
	IPv6          bool      `json:"ipv6,omitempty"`
	PowerState    string    `json:"powerState,omitempty"`
	// SubFaultDomain is the platform sub fault domain IMDS shows for every VM of it ("": none).
	SubFaultDomain string `json:"subFaultDomain,omitempty"`
	// LoadBalancerPools every VM's NIC joins.
	LoadBalancerPools []PoolRef `json:"loadBalancerPools,omitempty"`
}

// VirtualMachine is a standalone VM (with its own NIC "<name>-nic").
type VirtualMachine struct {
	ResourceGroup string `json:"resourceGroup"`
	Name          string `json:"name"`
	// ComputerName defaults to Name.
	ComputerName string            `json:"computerName,omitempty"`
	Zone         string            `json:"zone,omitempty"`
	VMSize       string            `json:"vmSize,omitempty"`
	Subnet       SubnetRef         `json:"subnet,omitempty"`
	IPv6         bool              `json:"ipv6,omitempty"`
	PowerState   string            `json:"powerState,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	// SubFaultDomain is the platform sub fault domain IMDS shows for the VM ("": none).
	SubFaultDomain string `json:"subFaultDomain,omitempty"`
	// LoadBalancerPools the VM's NIC joins.
	LoadBalancerPools []PoolRef `json:"loadBalancerPools,omitempty"`
}

// Defaults applied by Normalize.
const (
	DefaultSubscriptionID = "00000000-0000-0000-0000-000000000001"
	DefaultLocation       = "eastus"
	DefaultVMSize         = "Standard_D2s_v3"
)

// Power states a machine can be seeded in.
var powerStates = map[string]string{"": "running", "running": "running", "stopped": "stopped", "deallocated": "deallocated"}

// Load reads a topology file (YAML or JSON).
func Load(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse decodes YAML or JSON, refusing unknown fields so typos are reported.
func Parse(b []byte) (*Topology, error) {
	var t Topology
	if err := yaml.UnmarshalStrict(b, &t); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return &t, nil
}

// Normalize fills defaults and checks references; it returns a copy.
func (t Topology) Normalize() (*Topology, error) {
	n := t
	if n.SubscriptionID == "" {
		n.SubscriptionID = DefaultSubscriptionID
	}
	if n.Location == "" {
		n.Location = DefaultLocation
	}
	n.Location = strings.ToLower(strings.ReplaceAll(n.Location, " ", ""))
	rgs := map[string]bool{}
	for _, rg := range n.ResourceGroups {
		rgs[strings.ToLower(rg)] = true
	}
	// Every group a resource names is created, even if not listed.
	addRG := func(rg string) {
		if rg != "" && !rgs[strings.ToLower(rg)] {
			rgs[strings.ToLower(rg)] = true
			n.ResourceGroups = append(n.ResourceGroups, rg)
		}
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	need := func(what, rg, name string) {
		if rg == "" || name == "" {
			fail("%s needs resourceGroup and name (got %q/%q)", what, rg, name)
		}
		addRG(rg)
	}

	n.NetworkSecurityGroups = append([]Named(nil), t.NetworkSecurityGroups...)
	for _, x := range n.NetworkSecurityGroups {
		need("networkSecurityGroup", x.ResourceGroup, x.Name)
	}
	n.RouteTables = append([]Named(nil), t.RouteTables...)
	for _, x := range n.RouteTables {
		need("routeTable", x.ResourceGroup, x.Name)
	}
	n.VirtualNetworks = append([]VirtualNetwork(nil), t.VirtualNetworks...)
	for _, v := range n.VirtualNetworks {
		need("virtualNetwork", v.ResourceGroup, v.Name)
		if len(v.AddressPrefixes) == 0 {
			fail("virtualNetwork %s has no addressPrefixes", v.Name)
		}
		for _, s := range v.Subnets {
			if s.Name == "" || s.AddressPrefix == "" {
				fail("virtualNetwork %s: a subnet needs name and addressPrefix", v.Name)
			}
			if s.NetworkSecurityGroup != "" && !hasNamed(n.NetworkSecurityGroups, v.ResourceGroup, s.NetworkSecurityGroup) {
				fail("subnet %s/%s names networkSecurityGroup %s, which is not in the topology", v.Name, s.Name, s.NetworkSecurityGroup)
			}
			if s.RouteTable != "" && !hasNamed(n.RouteTables, v.ResourceGroup, s.RouteTable) {
				fail("subnet %s/%s names routeTable %s, which is not in the topology", v.Name, s.Name, s.RouteTable)
			}
			switch s.PrivateLinkServiceNetworkPolicies {
			case "", "Enabled", "Disabled":
			default:
				fail("subnet %s/%s: privateLinkServiceNetworkPolicies must be Enabled or Disabled, not %q", v.Name, s.Name, s.PrivateLinkServiceNetworkPolicies)
			}
		}
	}
	resolve := func(owner, rg string, ref SubnetRef, ipv6 bool) SubnetRef {
		r, err := n.resolveSubnet(rg, ref, ipv6)
		if err != nil {
			fail("%s: %v", owner, err)
		}
		return r
	}

	n.normalizeLoadBalancers(fail, need, resolve)
	n.normalizePrivateLink(fail, need, resolve)
	pools := func(owner, rg string, refs []PoolRef) []PoolRef {
		out := make([]PoolRef, len(refs))
		for i, r := range refs {
			if r.ResourceGroup == "" {
				r.ResourceGroup = rg
			}
			if !n.hasPool(r) {
				fail("%s: loadBalancerPools names %s/%s/%s, which is not in the topology", owner, r.ResourceGroup, r.LoadBalancer, r.Pool)
			}
			out[i] = r
		}
		return out
	}

	n.ScaleSets = append([]ScaleSet(nil), t.ScaleSets...)
	for i := range n.ScaleSets {
		s := &n.ScaleSets[i]
		need("scaleSet", s.ResourceGroup, s.Name)
		switch strings.ToLower(s.Orchestration) {
		case "", "uniform":
			s.Orchestration = "Uniform"
		case "flexible":
			s.Orchestration = "Flexible"
		default:
			fail("scaleSet %s: orchestration must be Uniform or Flexible, not %q", s.Name, s.Orchestration)
		}
		if s.Capacity < 0 {
			fail("scaleSet %s: negative capacity", s.Name)
		}
		if s.VMSize == "" {
			s.VMSize = DefaultVMSize
		}
		if s.ComputerNamePrefix == "" {
			s.ComputerNamePrefix = s.Name
		}
		s.PowerState = checkPower(fail, "scaleSet "+s.Name, s.PowerState)
		s.Subnet = resolve("scaleSet "+s.Name, s.ResourceGroup, s.Subnet, s.IPv6)
		s.LoadBalancerPools = pools("scaleSet "+s.Name, s.ResourceGroup, s.LoadBalancerPools)
	}
	n.AvailabilitySets = append([]AvailabilitySet(nil), t.AvailabilitySets...)
	for i := range n.AvailabilitySets {
		a := &n.AvailabilitySets[i]
		need("availabilitySet", a.ResourceGroup, a.Name)
		if a.FaultDomains == 0 {
			a.FaultDomains = 2
		}
		if a.UpdateDomains == 0 {
			a.UpdateDomains = 5
		}
		if a.FaultDomains < 1 || a.FaultDomains > 3 {
			fail("availabilitySet %s: faultDomains must be 1..3", a.Name)
		}
		if a.VMNamePrefix == "" {
			a.VMNamePrefix = a.Name + "-vm-"
		}
		if a.VMSize == "" {
			a.VMSize = DefaultVMSize
		}
		a.PowerState = checkPower(fail, "availabilitySet "+a.Name, a.PowerState)
		a.Subnet = resolve("availabilitySet "+a.Name, a.ResourceGroup, a.Subnet, a.IPv6)
		a.LoadBalancerPools = pools("availabilitySet "+a.Name, a.ResourceGroup, a.LoadBalancerPools)
	}
	n.VirtualMachines = append([]VirtualMachine(nil), t.VirtualMachines...)
	for i := range n.VirtualMachines {
		v := &n.VirtualMachines[i]
		need("virtualMachine", v.ResourceGroup, v.Name)
		if v.ComputerName == "" {
			v.ComputerName = v.Name
		}
		if v.VMSize == "" {
			v.VMSize = DefaultVMSize
		}
		v.PowerState = checkPower(fail, "virtualMachine "+v.Name, v.PowerState)
		v.Subnet = resolve("virtualMachine "+v.Name, v.ResourceGroup, v.Subnet, v.IPv6)
		v.LoadBalancerPools = pools("virtualMachine "+v.Name, v.ResourceGroup, v.LoadBalancerPools)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("topology: %s", strings.Join(errs, "; "))
	}
	return &n, nil
}

func checkPower(fail func(string, ...any), owner, p string) string {
	v, ok := powerStates[strings.ToLower(p)]
	if !ok {
		fail("%s: powerState must be running, stopped or deallocated, not %q", owner, p)
	}
	return v
}

func hasNamed(list []Named, rg, name string) bool {
	for _, x := range list {
		if strings.EqualFold(x.ResourceGroup, rg) && strings.EqualFold(x.Name, name) {
			return true
		}
	}
	return false
}

// resolveSubnet fills a subnet reference's defaults and checks that it exists.
func (t *Topology) resolveSubnet(ownerRG string, ref SubnetRef, ipv6 bool) (SubnetRef, error) {
	if len(t.VirtualNetworks) == 0 {
		return ref, fmt.Errorf("no virtualNetworks to place the machine in")
	}
	if ref.VNet == "" {
		first := t.VirtualNetworks[0]
		ref.VNet = first.Name
		if ref.ResourceGroup == "" {
			ref.ResourceGroup = first.ResourceGroup
		}
	}
	if ref.ResourceGroup == "" {
		// A VNet named without a group: the owner's group if it has one by that name, else
		// the first group that does.
		for _, v := range t.VirtualNetworks {
			if strings.EqualFold(v.Name, ref.VNet) && (ref.ResourceGroup == "" || strings.EqualFold(v.ResourceGroup, ownerRG)) {
				ref.ResourceGroup = v.ResourceGroup
			}
		}
	}
	for _, v := range t.VirtualNetworks {
		if !strings.EqualFold(v.Name, ref.VNet) || !strings.EqualFold(v.ResourceGroup, ref.ResourceGroup) {
			continue
		}
		if len(v.Subnets) == 0 {
			return ref, fmt.Errorf("virtualNetwork %s has no subnets", v.Name)
		}
		if ref.Name == "" {
			ref.Name = v.Subnets[0].Name
		}
		for _, s := range v.Subnets {
			if strings.EqualFold(s.Name, ref.Name) {
				if ipv6 && s.AddressPrefixV6 == "" {
					return ref, fmt.Errorf("ipv6 needs subnet %s to have addressPrefixV6", s.Name)
				}
				return ref, nil
			}
		}
		return ref, fmt.Errorf("subnet %s not found in virtualNetwork %s", ref.Name, ref.VNet)
	}
	return ref, fmt.Errorf("virtualNetwork %s/%s not found", ref.ResourceGroup, ref.VNet)
}
