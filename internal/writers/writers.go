// Package writers builds, once per provider, the group-commit writer of every Azure resource the
// CCM writes: load balancers (their backend pools included), network security groups, public
// IPs, private link services, subnets, route tables, node NICs, scale set VMs and scale set
// models. The set is handed to every
// controller that writes Azure, so each resource has exactly one writer whoever changes it, and
// concurrent changes from the service controller, the node backends, the admin-state
// controller, the Local pool updater and the migration share reads and PUTs instead of
// overwriting each other.
package writers

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azstore"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// Set is a provider's writers, one registry per resource type, keyed by resource ID.
type Set struct {
	// LoadBalancers own their load balancer whole, backend pools included: a pool is written
	// only through its load balancer's writer (writer.SubmitChild for pool-only changes).
	LoadBalancers  *writer.Registry[armnetwork.LoadBalancer]
	SecurityGroups *writer.Registry[armnetwork.SecurityGroup]
	PublicIPs      *writer.Registry[armnetwork.PublicIPAddress]
	RouteTables    *writer.Registry[armnetwork.RouteTable]
	// PrivateLinkServices of LoadBalancer services; a delete removes the private endpoint
	// connections first.
	PrivateLinkServices *writer.Registry[armnetwork.PrivateLinkService]
	// Subnets are only ever edited (the NAT subnet of private link services), never created.
	Subnets *writer.Registry[armnetwork.Subnet]
	// Interfaces are node NICs (compute subscription).
	Interfaces  *writer.Registry[armnetwork.Interface]
	ScaleSetVMs *writer.Registry[armcompute.VirtualMachineScaleSetVM]
	ScaleSets   *writer.Registry[armcompute.VirtualMachineScaleSet]
}

// Close closes every writer of the set (writer.Registry.Close): a reload calls it once the
// generation's controllers have stopped, so that the changes they still had queued are refused
// and the batches in flight finish before the next generation writes. It returns ctx's error if
// ctx ends first.
func (s *Set) Close(ctx context.Context) error {
	for _, c := range []interface{ Close(context.Context) error }{
		s.LoadBalancers, s.SecurityGroups, s.PublicIPs, s.RouteTables, s.PrivateLinkServices,
		s.Subnets, s.Interfaces, s.ScaleSetVMs, s.ScaleSets,
	} {
		if err := c.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Options are what the writers are built from.
type Options struct {
	// Network is the client factory of the cluster's network resources (load balancers, NSG,
	// public IPs, route table); NodeNetwork that of the node NICs (default Network); Compute
	// that of scale sets (may be nil where no scale set is written).
	Network     *armnetwork.ClientFactory
	NodeNetwork *armnetwork.ClientFactory
	// NetworkRaw, when set, carries load balancer and NSG GETs and PUTs (Network's
	// subscription) with the armjson codec instead of the SDK's generated JSON methods.
	NetworkRaw *azstore.RawClient
	Compute    *armcompute.ClientFactory
	// PollFrequency of long-running operations (default 5s).
	PollFrequency time.Duration
	// CacheTTL of every model but the route table's (default 120s; negative: no cache).
	CacheTTL time.Duration
	// RouteTableCacheTTL of the route table model (default 120s).
	RouteTableCacheTTL time.Duration
	// SecurityGroupCacheTTL of the NSG model (default 120s).
	SecurityGroupCacheTTL time.Duration
	// RouteGather is how long a route table batch waits for more node changes when the table
	// is cached (default 200ms): the route controller creates a node's route alone, and nodes
	// join in waves.
	RouteGather time.Duration
	// DisableMerging makes every load balancer, NSG and public IP change its own
	// read-modify-write. Only the burst benchmark's no-merging variants use it.
	DisableMerging bool
}

// sharedWriteGather is the group-commit window of the writers that many services share (load
// balancers, the NSG): the services of one load balancer batch reach the NSG within
// milliseconds of each other, and without a window the first one would be written alone.
// Small next to an ARM write (0.5–2 s).
const sharedWriteGather = 100 * time.Millisecond

// OptionsFor derives the cache lifetimes from azure.json: loadBalancerCacheTTLInSeconds for
// every model but the route table (routeTableCacheTTLInSeconds) and the NSG
// (nsgCacheTTLInSeconds); disableAPICallCache turns all of them off.
func OptionsFor(cfg *config.Config) Options {
	o := Options{}
	if s := cfg.LoadBalancerCacheTTLInSeconds; s > 0 {
		o.CacheTTL = time.Duration(s) * time.Second
	}
	if s := cfg.RouteTableCacheTTLInSeconds; s > 0 {
		o.RouteTableCacheTTL = time.Duration(s) * time.Second
	}
	if s := cfg.NsgCacheTTLInSeconds; s > 0 {
		o.SecurityGroupCacheTTL = time.Duration(s) * time.Second
	}
	if cfg.DisableAPICallCache {
		o.CacheTTL, o.RouteTableCacheTTL, o.SecurityGroupCacheTTL = -1, -1, -1
	}
	return o
}

// New builds the set. Writers themselves are created on first use of a resource ID.
func New(o Options) *Set {
	if o.NodeNetwork == nil {
		o.NodeNetwork = o.Network
	}
	ttl := func(d time.Duration) time.Duration {
		switch {
		case d < 0:
			return 0
		case d == 0:
			return 120 * time.Second
		}
		return d
	}
	cacheTTL, routeTTL, nsgTTL := ttl(o.CacheTTL), ttl(o.RouteTableCacheTTL), ttl(o.SecurityGroupCacheTTL)
	if o.RouteGather == 0 {
		o.RouteGather = 200 * time.Millisecond
	}
	maxBatch, gather := 0, sharedWriteGather
	if o.DisableMerging {
		maxBatch, gather = 1, 0
	}
	poll := o.PollFrequency
	net, nodeNet, compute := o.Network, o.NodeNetwork, o.Compute
	return &Set{
		LoadBalancers: writer.NewRegistry(func(id string) writer.Store[armnetwork.LoadBalancer] {
			return &azstore.LoadBalancer{Client: net.NewLoadBalancersClient(), Pools: net.NewLoadBalancerBackendAddressPoolsClient(), Raw: o.NetworkRaw, ID: id,
				ResourceGroup: azureid.ResourceGroup(id), Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.LoadBalancer]{CacheTTL: cacheTTL, MaxBatch: maxBatch, Gather: gather}),
		SecurityGroups: writer.NewRegistry(func(id string) writer.Store[armnetwork.SecurityGroup] {
			return &azstore.SecurityGroup{Client: net.NewSecurityGroupsClient(), Raw: o.NetworkRaw, ID: id, ResourceGroup: azureid.ResourceGroup(id),
				Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.SecurityGroup]{CacheTTL: nsgTTL, MaxBatch: maxBatch, Gather: gather}),
		PublicIPs: writer.NewRegistry(func(id string) writer.Store[armnetwork.PublicIPAddress] {
			return &azstore.PublicIP{Client: net.NewPublicIPAddressesClient(), ResourceGroup: azureid.ResourceGroup(id),
				Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.PublicIPAddress]{CacheTTL: cacheTTL, MaxBatch: maxBatch}),
		PrivateLinkServices: writer.NewRegistry(func(id string) writer.Store[armnetwork.PrivateLinkService] {
			return &azstore.PrivateLinkService{Client: net.NewPrivateLinkServicesClient(), ResourceGroup: azureid.ResourceGroup(id),
				Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.PrivateLinkService]{CacheTTL: cacheTTL}),
		Subnets: writer.NewRegistry(func(id string) writer.Store[armnetwork.Subnet] {
			return &azstore.Subnet{Client: net.NewSubnetsClient(), ResourceGroup: azureid.ResourceGroup(id),
				VNet: azureid.Name(azureid.Parent(id)), Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.Subnet]{CacheTTL: cacheTTL, MaxBatch: maxBatch, Gather: gather}),
		RouteTables: writer.NewRegistry(func(id string) writer.Store[armnetwork.RouteTable] {
			return &azstore.RouteTable{Client: net.NewRouteTablesClient(), ResourceGroup: azureid.ResourceGroup(id),
				Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.RouteTable]{CacheTTL: routeTTL, Gather: o.RouteGather}),
		Interfaces: writer.NewRegistry(func(id string) writer.Store[armnetwork.Interface] {
			return &azstore.Interface{Client: nodeNet.NewInterfacesClient(), ResourceGroup: azureid.ResourceGroup(id),
				Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armnetwork.Interface]{CacheTTL: cacheTTL}),
		ScaleSetVMs: writer.NewRegistry(func(id string) writer.Store[armcompute.VirtualMachineScaleSetVM] {
			return &azstore.ScaleSetVM{Client: compute.NewVirtualMachineScaleSetVMsClient(), ResourceGroup: azureid.ResourceGroup(id),
				ScaleSet: azureid.Name(azureid.Parent(id)), InstanceID: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armcompute.VirtualMachineScaleSetVM]{CacheTTL: cacheTTL}),
		ScaleSets: writer.NewRegistry(func(id string) writer.Store[armcompute.VirtualMachineScaleSet] {
			return &azstore.ScaleSet{Client: compute.NewVirtualMachineScaleSetsClient(), ResourceGroup: azureid.ResourceGroup(id),
				Name: azureid.Name(id), PollFrequency: poll}
		}, writer.Options[armcompute.VirtualMachineScaleSet]{CacheTTL: cacheTTL}),
	}
}
