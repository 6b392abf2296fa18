package arm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// Caches are the list-based caches of node-side resources. Keys are "<rg>" or "<rg>/<vmss>",
// case-insensitive. Writers that change one of these resources call the matching Invalidate.
type Caches struct {
	// VMs: one LIST (with instance view) per resource group; covers availability-set,
	// standalone and flexible scale set VMs.
	VMs *ListCache[*armcompute.VirtualMachine]
	// ScaleSets: one LIST of scale sets per resource group (orchestration mode, SKU, zones).
	ScaleSets *ListCache[*armcompute.VirtualMachineScaleSet]
	// ScaleSetVMs: one LIST (with instance view) per uniform scale set, key "<rg>/<vmss>".
	ScaleSetVMs *ListCache[*armcompute.VirtualMachineScaleSetVM]
	// NICs: one LIST per resource group (standalone and flexible VMs' NICs).
	NICs *ListCache[*armnetwork.Interface]
	// ScaleSetNICs: one LIST per uniform scale set, key "<rg>/<vmss>".
	ScaleSetNICs *ListCache[*armnetwork.Interface]
	// PublicIPs: one LIST per resource group (compute subscription: the nodes' public IPs).
	PublicIPs *ListCache[*armnetwork.PublicIPAddress]
	// NetworkPublicIPs: the public IPs of the network subscription (load balancer frontends);
	// the same cache as PublicIPs unless networkResourceSubscriptionID names another one.
	NetworkPublicIPs *ListCache[*armnetwork.PublicIPAddress]
	// ScaleSetPublicIPs: instance-level public IPs of a uniform scale set, key "<rg>/<vmss>".
	ScaleSetPublicIPs *ListCache[*armnetwork.PublicIPAddress]
	// PrivateLinkServices: one LIST per resource group of the network subscription (which
	// private link service holds a load balancer frontend).
	PrivateLinkServices *ListCache[*armnetwork.PrivateLinkService]
}

func ttl(seconds int, disabled bool) time.Duration {
	if disabled {
		return 0
	}
	return time.Duration(seconds) * time.Second
}

func splitScaleSetKey(key string) (rg, vmss string) {
	rg, vmss, _ = strings.Cut(key, "/")
	return rg, vmss
}

// ScaleSetKey is the cache key of a scale set.
func ScaleSetKey(rg, vmss string) string { return strings.ToLower(rg + "/" + vmss) }

func newCaches(c *Clients, cfg *config.Config, now func() time.Time) *Caches {
	off := cfg.DisableAPICallCache
	m := c.Metrics
	withInstanceView := !cfg.ListVmssVirtualMachinesWithoutInstanceView
	caches := &Caches{
		VMs: NewListCache("vms", ttl(cfg.VMCacheTTLInSeconds, off), func(ctx context.Context, rg string) ([]*armcompute.VirtualMachine, error) {
			return collect(ctx, c.Compute.NewVirtualMachinesClient().NewListPager(rg,
				&armcompute.VirtualMachinesClientListOptions{Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)}),
				func(r armcompute.VirtualMachinesClientListResponse) []*armcompute.VirtualMachine { return r.Value })
		}, now, m),
		ScaleSets: NewListCache("scalesets", ttl(cfg.VmssCacheTTLInSeconds, off), func(ctx context.Context, rg string) ([]*armcompute.VirtualMachineScaleSet, error) {
			return collect(ctx, c.Compute.NewVirtualMachineScaleSetsClient().NewListPager(rg, nil),
				func(r armcompute.VirtualMachineScaleSetsClientListResponse) []*armcompute.VirtualMachineScaleSet {
					return r.Value
				})
		}, now, m),
		ScaleSetVMs: NewListCache("scalesetvms", ttl(cfg.VmssVirtualMachinesCacheTTLInSeconds, off), func(ctx context.Context, key string) ([]*armcompute.VirtualMachineScaleSetVM, error) {
			rg, vmss := splitScaleSetKey(key)
			var opts *armcompute.VirtualMachineScaleSetVMsClientListOptions
			if withInstanceView {
				opts = &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")}
			}
			return collect(ctx, c.Compute.NewVirtualMachineScaleSetVMsClient().NewListPager(rg, vmss, opts),
				func(r armcompute.VirtualMachineScaleSetVMsClientListResponse) []*armcompute.VirtualMachineScaleSetVM {
					return r.Value
				})
		}, now, m),
		NICs: NewListCache("nics", ttl(cfg.VMCacheTTLInSeconds, off), func(ctx context.Context, rg string) ([]*armnetwork.Interface, error) {
			return collect(ctx, c.NodeNetwork.NewInterfacesClient().NewListPager(rg, nil),
				func(r armnetwork.InterfacesClientListResponse) []*armnetwork.Interface { return r.Value })
		}, now, m),
		ScaleSetNICs: NewListCache("scalesetnics", ttl(cfg.VmssVirtualMachinesCacheTTLInSeconds, off), func(ctx context.Context, key string) ([]*armnetwork.Interface, error) {
			rg, vmss := splitScaleSetKey(key)
			return collect(ctx, c.NodeNetwork.NewInterfacesClient().NewListVirtualMachineScaleSetNetworkInterfacesPager(rg, vmss, nil),
				func(r armnetwork.InterfacesClientListVirtualMachineScaleSetNetworkInterfacesResponse) []*armnetwork.Interface {
					return r.Value
				})
		}, now, m),
		PublicIPs: NewPublicIPCache("publicips", c.NodeNetwork, ttl(cfg.PublicIPCacheTTLInSeconds, off), now, m),
		ScaleSetPublicIPs: NewListCache("scalesetpublicips", ttl(cfg.PublicIPCacheTTLInSeconds, off), func(ctx context.Context, key string) ([]*armnetwork.PublicIPAddress, error) {
			rg, vmss := splitScaleSetKey(key)
			return collect(ctx, c.NodeNetwork.NewPublicIPAddressesClient().NewListVirtualMachineScaleSetPublicIPAddressesPager(rg, vmss, nil),
				func(r armnetwork.PublicIPAddressesClientListVirtualMachineScaleSetPublicIPAddressesResponse) []*armnetwork.PublicIPAddress {
					return r.Value
				})
		}, now, m),
	}
	caches.PrivateLinkServices = NewPrivateLinkServiceCache(c.Network, ttl(cfg.PlsCacheTTLInSeconds, off), now, m)
	caches.NetworkPublicIPs = caches.PublicIPs
	if !strings.EqualFold(cfg.NetworkSubscriptionID(), cfg.SubscriptionID) || CrossTenant(cfg) {
		caches.NetworkPublicIPs = NewPublicIPCache("networkpublicips", c.Network, ttl(cfg.PublicIPCacheTTLInSeconds, off), now, m)
	}
	return caches
}

// NewPrivateLinkServiceCache is a list cache of the private link services of a resource group,
// listed with net (ttl <= 0: every Get lists).
func NewPrivateLinkServiceCache(net *armnetwork.ClientFactory, ttl time.Duration, now func() time.Time, m *Metrics) *ListCache[*armnetwork.PrivateLinkService] {
	return NewListCache("privatelinkservices", ttl, func(ctx context.Context, rg string) ([]*armnetwork.PrivateLinkService, error) {
		return collect(ctx, net.NewPrivateLinkServicesClient().NewListPager(rg, nil),
			func(r armnetwork.PrivateLinkServicesClientListResponse) []*armnetwork.PrivateLinkService {
				return r.Value
			})
	}, now, m)
}

// NewPublicIPCache is a list cache of the public IPs of a resource group, listed with net (ttl
// <= 0: every Get lists).
func NewPublicIPCache(name string, net *armnetwork.ClientFactory, ttl time.Duration, now func() time.Time, m *Metrics) *ListCache[*armnetwork.PublicIPAddress] {
	c := NewListCache(name, ttl, func(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
		return collect(ctx, net.NewPublicIPAddressesClient().NewListPager(rg, nil),
			func(r armnetwork.PublicIPAddressesClientListResponse) []*armnetwork.PublicIPAddress { return r.Value })
	}, now, m)
	c.version = publicIPVersion
	return c
}

// publicIPVersion names a public IP and encodes what of it only a write of the public IP
// itself changes: not its ETag, provisioning state or the back-references Azure sets when a
// load balancer frontend, NIC or NAT gateway starts or stops using it (which renew the ETag
// too), so that the CCM's own load balancer writes do not read as someone else's change.
func publicIPVersion(p *armnetwork.PublicIPAddress) (string, string) {
	if p == nil {
		return "", ""
	}
	name := ""
	if p.Name != nil {
		name = strings.ToLower(*p.Name)
	}
	c := *p
	c.Etag = nil
	if p.Properties != nil {
		props := *p.Properties
		props.IPConfiguration, props.ProvisioningState, props.NatGateway = nil, nil, nil
		c.Properties = &props
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return name, fmt.Sprintf("unencodable %p", p) // never equal: counted as changed
	}
	return name, string(b)
}

// InvalidateScaleSet drops everything cached about one scale set (after a write to it or to
// one of its instances).
func (c *Caches) InvalidateScaleSet(rg, vmss string) {
	k := ScaleSetKey(rg, vmss)
	c.ScaleSetVMs.Invalidate(k)
	c.ScaleSetNICs.Invalidate(k)
	c.ScaleSetPublicIPs.Invalidate(k)
	c.ScaleSets.Invalidate(rg)
}

// InvalidateResourceGroup drops the VM, NIC and public IP lists of a resource group (after a
// write to a VM or NIC in it).
func (c *Caches) InvalidateResourceGroup(rg string) {
	c.VMs.Invalidate(rg)
	c.NICs.Invalidate(rg)
	c.PublicIPs.Invalidate(rg)
}

// InvalidateAll drops every cache.
func (c *Caches) InvalidateAll() {
	c.VMs.InvalidateAll()
	c.ScaleSets.InvalidateAll()
	c.ScaleSetVMs.InvalidateAll()
	c.NICs.InvalidateAll()
	c.ScaleSetNICs.InvalidateAll()
	c.PublicIPs.InvalidateAll()
	c.NetworkPublicIPs.InvalidateAll()
	c.PrivateLinkServices.InvalidateAll()
	c.ScaleSetPublicIPs.InvalidateAll()
}

type pager[R any] interface {
	More() bool
	NextPage(ctx context.Context) (R, error)
}

// collect reads every page. A 404 (e.g. the resource group or scale set does not exist) is an
// empty list, not an error: "no such VM" is an answer the callers need.
func collect[R any, T any](ctx context.Context, p pager[R], items func(R) []T) ([]T, error) {
	var out []T
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if IsNotFound(err) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, items(page)...)
	}
	return out, nil
}
