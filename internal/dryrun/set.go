package dryrun

import (
	"context"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azstore"
	"github.com/azure-ccm/azure-ccm/internal/writer"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// ARM types of the recorded writes.
const (
	TypeLoadBalancer   = "Microsoft.Network/loadBalancers"
	TypeSecurityGroup  = "Microsoft.Network/networkSecurityGroups"
	TypePublicIP       = "Microsoft.Network/publicIPAddresses"
	TypeRouteTable     = "Microsoft.Network/routeTables"
	TypeInterface      = "Microsoft.Network/networkInterfaces"
	TypeScaleSetVM     = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
	TypeScaleSet       = "Microsoft.Compute/virtualMachineScaleSets"
	TypePrivateLink    = "Microsoft.Network/privateLinkServices"
	TypeSubnet         = "Microsoft.Network/virtualNetworks/subnets"
	typeBackendPoolSub = "backendAddressPools"
)

// NewSet returns a writer set with one registry per registry of live: its writers batch and
// apply mutations as real ones do, read through live's writers (and so their caches) and
// record into r instead of writing. Nothing is cached in the dry-run writers themselves, so
// they always see the planned state or what live knows.
func NewSet(live *writers.Set, r *Recorder) *writers.Set {
	return &writers.Set{
		LoadBalancers: writer.NewRegistry(func(id string) writer.Store[armnetwork.LoadBalancer] {
			return &lbStore{store[armnetwork.LoadBalancer]{typ: TypeLoadBalancer, id: id, real: live.LoadBalancers.For(id), rec: r, fill: fillLB}}
		}, writer.Options[armnetwork.LoadBalancer]{}),
		SecurityGroups: writer.NewRegistry(func(id string) writer.Store[armnetwork.SecurityGroup] {
			return &store[armnetwork.SecurityGroup]{typ: TypeSecurityGroup, id: id, real: live.SecurityGroups.For(id), rec: r}
		}, writer.Options[armnetwork.SecurityGroup]{}),
		PublicIPs: writer.NewRegistry(func(id string) writer.Store[armnetwork.PublicIPAddress] {
			return &store[armnetwork.PublicIPAddress]{typ: TypePublicIP, id: id, real: live.PublicIPs.For(id), rec: r, fill: fillPIP}
		}, writer.Options[armnetwork.PublicIPAddress]{}),
		RouteTables: writer.NewRegistry(func(id string) writer.Store[armnetwork.RouteTable] {
			return &store[armnetwork.RouteTable]{typ: TypeRouteTable, id: id, real: live.RouteTables.For(id), rec: r,
				fill: func(_ *Recorder, id string, t *armnetwork.RouteTable) { setID(&t.ID, &t.Name, id) }}
		}, writer.Options[armnetwork.RouteTable]{}),
		Interfaces: writer.NewRegistry(func(id string) writer.Store[armnetwork.Interface] {
			return &store[armnetwork.Interface]{typ: TypeInterface, id: id, real: live.Interfaces.For(id), rec: r}
		}, writer.Options[armnetwork.Interface]{}),
		ScaleSetVMs: writer.NewRegistry(func(id string) writer.Store[armcompute.VirtualMachineScaleSetVM] {
			return &store[armcompute.VirtualMachineScaleSetVM]{typ: TypeScaleSetVM, id: id, real: live.ScaleSetVMs.For(id), rec: r}
		}, writer.Options[armcompute.VirtualMachineScaleSetVM]{}),
		ScaleSets: writer.NewRegistry(func(id string) writer.Store[armcompute.VirtualMachineScaleSet] {
			return &store[armcompute.VirtualMachineScaleSet]{typ: TypeScaleSet, id: id, real: live.ScaleSets.For(id), rec: r}
		}, writer.Options[armcompute.VirtualMachineScaleSet]{}),
		PrivateLinkServices: writer.NewRegistry(func(id string) writer.Store[armnetwork.PrivateLinkService] {
			return &store[armnetwork.PrivateLinkService]{typ: TypePrivateLink, id: id, real: live.PrivateLinkServices.For(id), rec: r,
				fill:       func(_ *Recorder, id string, p *armnetwork.PrivateLinkService) { setID(&p.ID, &p.Name, id) },
				dependents: privateEndpointConnections}
		}, writer.Options[armnetwork.PrivateLinkService]{}),
		Subnets: writer.NewRegistry(func(id string) writer.Store[armnetwork.Subnet] {
			return &store[armnetwork.Subnet]{typ: TypeSubnet, id: id, real: live.Subnets.For(id), rec: r}
		}, writer.Options[armnetwork.Subnet]{}),
	}
}

// lbStore records pool-only batches as the backend pool writes they would be.
type lbStore struct {
	store[armnetwork.LoadBalancer]
}

var _ writer.ChildStore[armnetwork.LoadBalancer] = (*lbStore)(nil)

// OnlyChildChanged implements writer.ChildStore as the real store does.
func (s *lbStore) OnlyChildChanged(cur, work *armnetwork.LoadBalancer, pool string) bool {
	return azstore.OnlyPoolChanged(cur, work, pool)
}

// PutChild implements writer.ChildStore: records a write of the pool.
func (s *lbStore) PutChild(ctx context.Context, work *armnetwork.LoadBalancer, pool, _ string) (*armnetwork.LoadBalancer, error) {
	before, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.rec.record(s.typ, s.id, Update, pool, before, writer.DeepCopy(work), nil); err != nil {
		return nil, err
	}
	return work, nil
}

// privateEndpointConnections are the connections a private link service's deletion removes,
// each with its consumer's private endpoint and state.
func privateEndpointConnections(p *armnetwork.PrivateLinkService) []Dependent {
	if p.Properties == nil {
		return nil
	}
	var out []Dependent
	for _, c := range p.Properties.PrivateEndpointConnections {
		if c == nil {
			continue
		}
		d := Dependent{Kind: "private endpoint connection", Name: deref(c.Name)}
		if c.Properties != nil {
			if pe := c.Properties.PrivateEndpoint; pe != nil {
				d.Target = deref(pe.ID)
			}
			if st := c.Properties.PrivateLinkServiceConnectionState; st != nil {
				d.State = deref(st.Status)
			}
		}
		out = append(out, d)
	}
	return out
}

func setID(id, name **string, resourceID string) {
	if *id == nil {
		*id = to.Ptr(resourceID)
	}
	if *name == nil {
		*name = to.Ptr(resourceID[strings.LastIndex(resourceID, "/")+1:])
	}
}

// fillLB sets the IDs ARM gives a load balancer's new children and a placeholder address on
// new dynamic private frontends.
func fillLB(r *Recorder, id string, lb *armnetwork.LoadBalancer) {
	setID(&lb.ID, &lb.Name, id)
	p := lb.Properties
	if p == nil {
		return
	}
	child := func(cid **string, name *string, kind string) {
		if *cid == nil && name != nil {
			*cid = to.Ptr(id + "/" + kind + "/" + *name)
		}
	}
	for _, f := range p.FrontendIPConfigurations {
		if f == nil {
			continue
		}
		child(&f.ID, f.Name, "frontendIPConfigurations")
		if fp := f.Properties; fp != nil && fp.Subnet != nil && (fp.PrivateIPAddress == nil || *fp.PrivateIPAddress == "") {
			v6 := fp.PrivateIPAddressVersion != nil && *fp.PrivateIPAddressVersion == armnetwork.IPVersionIPv6
			fp.PrivateIPAddress = to.Ptr(r.placeholder(v6, "private address of new frontend "+deref(f.Name)))
		}
	}
	for _, x := range p.LoadBalancingRules {
		if x != nil {
			child(&x.ID, x.Name, "loadBalancingRules")
		}
	}
	for _, x := range p.Probes {
		if x != nil {
			child(&x.ID, x.Name, "probes")
		}
	}
	for _, x := range p.BackendAddressPools {
		if x != nil {
			child(&x.ID, x.Name, typeBackendPoolSub)
		}
	}
}

// fillPIP sets the ID and, on a new public IP, a placeholder address.
func fillPIP(r *Recorder, id string, p *armnetwork.PublicIPAddress) {
	setID(&p.ID, &p.Name, id)
	if p.Properties == nil {
		p.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	if p.Properties.IPAddress == nil || *p.Properties.IPAddress == "" {
		v6 := p.Properties.PublicIPAddressVersion != nil && *p.Properties.PublicIPAddressVersion == armnetwork.IPVersionIPv6
		p.Properties.IPAddress = to.Ptr(r.placeholder(v6, "address of new public IP "+deref(p.Name)))
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Lists is what the load balancer code needs of a list cache (one LIST per resource group,
// kept current by the writes made).
type Lists[T any] interface {
	Get(ctx context.Context, rg string) ([]T, error)
	Refresh(ctx context.Context, rg string) ([]T, error)
	Invalidate(rg string)
	Update(rg string, fn func(items []T) []T)
	// ExternalChanges counts the LISTs that found rg's items changed by someone else
	// (arm.ListCache.ExternalChanges).
	ExternalChanges(rg string) uint64
	// Writing marks an item as being written until done (arm.ListCache.Writing).
	Writing(rg, name string) (done func())
}

// PublicIPLists and PrivateLinkLists are the two lists the load balancer code keeps.
type (
	PublicIPLists    = Lists[*armnetwork.PublicIPAddress]
	PrivateLinkLists = Lists[*armnetwork.PrivateLinkService]
)

// PublicIPs returns live seen through the recorder: the lists as live has them with the
// planned edits applied. Edits stay in the recorder (dropped by Reset); live is only read.
func (r *Recorder) PublicIPs(live PublicIPLists) PublicIPLists {
	return &listOverlay[*armnetwork.PublicIPAddress]{real: live, r: r, kind: "publicIPAddresses"}
}

// PrivateLinks is PublicIPs for the private link service lists. A nil live stays nil.
func (r *Recorder) PrivateLinks(live PrivateLinkLists) PrivateLinkLists {
	if live == nil {
		return nil
	}
	return &listOverlay[*armnetwork.PrivateLinkService]{real: live, r: r, kind: "privateLinkServices"}
}

type listOverlay[T any] struct {
	real Lists[T]
	r    *Recorder
	kind string
}

func (l *listOverlay[T]) key(rg string) string { return l.kind + "/" + strings.ToLower(rg) }

func (l *listOverlay[T]) apply(rg string, items []T) []T {
	l.r.mu.Lock()
	edits := l.r.listEdits[l.key(rg)]
	l.r.mu.Unlock()
	if len(edits) == 0 {
		return items
	}
	out := append([]T(nil), items...)
	for _, e := range edits {
		out = e.(func([]T) []T)(out)
	}
	return out
}

func (l *listOverlay[T]) Get(ctx context.Context, rg string) ([]T, error) {
	items, err := l.real.Get(ctx, rg)
	if err != nil {
		return nil, err
	}
	return l.apply(rg, items), nil
}

func (l *listOverlay[T]) Refresh(ctx context.Context, rg string) ([]T, error) {
	items, err := l.real.Refresh(ctx, rg)
	if err != nil {
		return nil, err
	}
	return l.apply(rg, items), nil
}

// Invalidate does nothing: the planned edits are the dry run's and real's list is not ours to
// drop.
func (l *listOverlay[T]) Invalidate(string) {}

// ExternalChanges implements Lists: Azure's, as real counts them (planned edits are not Azure's).
func (l *listOverlay[T]) ExternalChanges(rg string) uint64 { return l.real.ExternalChanges(rg) }

// Writing implements Lists: a planned write is not one in flight.
func (l *listOverlay[T]) Writing(string, string) func() { return func() {} }

func (l *listOverlay[T]) Update(rg string, fn func(items []T) []T) {
	l.r.mu.Lock()
	k := l.key(rg)
	l.r.listEdits[k] = append(l.r.listEdits[k], any(fn))
	l.r.mu.Unlock()
}
