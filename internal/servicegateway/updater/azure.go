package updater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/servicegateway/difftracker"
)

// Azure is the ARM side of the updater: the gateway actions and the service resources. Every
// method tries once; retrying is the updater's job.
type Azure struct {
	Scope   Scope
	Network *armnetwork.ClientFactory
	// PollFrequency of long-running operations (default 1s).
	PollFrequency time.Duration
}

func (a *Azure) poll() *runtime.PollUntilDoneOptions {
	f := a.PollFrequency
	if f <= 0 {
		f = time.Second
	}
	return &runtime.PollUntilDoneOptions{Frequency: f}
}

// synchronous reports whether err is NRP's synchronous completion of a gateway POST: a 200
// the generated client does not expect (it only knows 202/204) and reports as an error
// without an error code. A 200 to anything but the POST itself is a real failure.
func synchronous(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusOK || re.ErrorCode != "" {
		return false
	}
	return re.RawResponse == nil || re.RawResponse.Request == nil || re.RawResponse.Request.Method == http.MethodPost
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// StatusOf is the HTTP status of an ARM error (0 if none).
func StatusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// UpdateServices sends one updateServices request (PartialUpdate).
func (a *Azure) UpdateServices(ctx context.Context, reqs []*armnetwork.ServiceGatewayServiceRequest) error {
	p, err := a.Network.NewServiceGatewaysClient().BeginUpdateServices(ctx, a.Scope.ResourceGroup, GatewayName,
		armnetwork.ServiceGatewayUpdateServicesRequest{Action: to.Ptr(armnetwork.ServiceUpdateActionPartialUpdate), ServiceRequests: reqs}, nil)
	if err != nil {
		if synchronous(err) {
			return nil
		}
		return err
	}
	_, err = p.PollUntilDone(ctx, a.poll())
	return err
}

// UpdateAddressLocations sends one updateAddressLocations request.
func (a *Azure) UpdateAddressLocations(ctx context.Context, u difftracker.LocationsUpdate) error {
	req := armnetwork.ServiceGatewayUpdateAddressLocationsRequest{Action: to.Ptr(armnetwork.UpdateActionPartialUpdate),
		AddressLocations: []*armnetwork.ServiceGatewayAddressLocation{}}
	if u.Full {
		req.Action = to.Ptr(armnetwork.UpdateActionFullUpdate)
	}
	for _, l := range u.Locations {
		// Explicit actions and non-null arrays: NRP reads an absent field as "unchanged".
		loc := &armnetwork.ServiceGatewayAddressLocation{AddressLocation: to.Ptr(l.Node),
			AddressUpdateAction: to.Ptr(armnetwork.AddressUpdateActionPartialUpdate), Addresses: []*armnetwork.ServiceGatewayAddress{}}
		if l.Full || u.Full {
			loc.AddressUpdateAction = to.Ptr(armnetwork.AddressUpdateActionFullUpdate)
		}
		for _, ad := range l.Addresses {
			svcs := make([]*string, 0, len(ad.Services))
			for _, s := range ad.Services {
				svcs = append(svcs, to.Ptr(s))
			}
			loc.Addresses = append(loc.Addresses, &armnetwork.ServiceGatewayAddress{Address: to.Ptr(ad.IP), Services: svcs})
		}
		req.AddressLocations = append(req.AddressLocations, loc)
	}
	p, err := a.Network.NewServiceGatewaysClient().BeginUpdateAddressLocations(ctx, a.Scope.ResourceGroup, GatewayName, req, nil)
	if err != nil {
		if synchronous(err) {
			return nil
		}
		return err
	}
	_, err = p.PollUntilDone(ctx, a.poll())
	return err
}

// GatewayState is the gateway as read at start-up.
type GatewayState struct {
	Services  []*armnetwork.ServiceGatewayService
	Locations map[string]map[string][]string // node → address → services
}

// ReadGateway reads the gateway's services and address locations (both pagers).
func (a *Azure) ReadGateway(ctx context.Context) (*GatewayState, error) {
	c := a.Network.NewServiceGatewaysClient()
	st := &GatewayState{Locations: map[string]map[string][]string{}}
	sp := c.NewGetServicesPager(a.Scope.ResourceGroup, GatewayName, nil)
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("service gateway %s services: %w", GatewayName, err)
		}
		st.Services = append(st.Services, page.Value...)
	}
	lp := c.NewGetAddressLocationsPager(a.Scope.ResourceGroup, GatewayName, nil)
	for lp.More() {
		page, err := lp.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("service gateway %s address locations: %w", GatewayName, err)
		}
		for _, l := range page.Value {
			if l == nil || l.AddressLocation == nil {
				continue
			}
			m := map[string][]string{}
			for _, ad := range l.Addresses {
				if ad == nil || ad.Address == nil {
					continue
				}
				var svcs []string
				for _, s := range ad.Services {
					if s != nil {
						svcs = append(svcs, *s)
					}
				}
				m[*ad.Address] = svcs
			}
			st.Locations[*l.AddressLocation] = m
		}
	}
	return st, nil
}

// Owned is what this cluster created in the resource group, by name.
type Owned struct {
	LBs  map[string]*armnetwork.LoadBalancer
	NATs map[string]*armnetwork.NatGateway
	PIPs map[string]*armnetwork.PublicIPAddress // by PIP name
}

func ownedBy(tags map[string]*string, cluster string) bool {
	v, ok := tags[TagCluster]
	_, kind := tags[TagKind]
	return ok && kind && v != nil && strings.EqualFold(*v, cluster)
}

// ListOwned lists the load balancers, NAT gateways and public IPs of the resource group that
// carry this cluster's tags.
func (a *Azure) ListOwned(ctx context.Context) (*Owned, error) {
	o := &Owned{LBs: map[string]*armnetwork.LoadBalancer{}, NATs: map[string]*armnetwork.NatGateway{}, PIPs: map[string]*armnetwork.PublicIPAddress{}}
	lp := a.Network.NewLoadBalancersClient().NewListPager(a.Scope.ResourceGroup, nil)
	for lp.More() {
		page, err := lp.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list load balancers: %w", err)
		}
		for _, lb := range page.Value {
			if lb != nil && lb.Name != nil && ownedBy(lb.Tags, a.Scope.ClusterName) {
				o.LBs[*lb.Name] = lb
			}
		}
	}
	np := a.Network.NewNatGatewaysClient().NewListPager(a.Scope.ResourceGroup, nil)
	for np.More() {
		page, err := np.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list NAT gateways: %w", err)
		}
		for _, n := range page.Value {
			if n != nil && n.Name != nil && ownedBy(n.Tags, a.Scope.ClusterName) {
				o.NATs[*n.Name] = n
			}
		}
	}
	pp := a.Network.NewPublicIPAddressesClient().NewListPager(a.Scope.ResourceGroup, nil)
	for pp.More() {
		page, err := pp.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list public IPs: %w", err)
		}
		for _, p := range page.Value {
			if p != nil && p.Name != nil && ownedBy(p.Tags, a.Scope.ClusterName) {
				o.PIPs[*p.Name] = p
			}
		}
	}
	return o, nil
}

// EnsurePIP writes the public IP of a service and returns its address.
func (a *Azure) EnsurePIP(ctx context.Context, name, kind string, ipv6 bool) (string, error) {
	p, err := a.Network.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, a.Scope.ResourceGroup, PIPName(name), a.Scope.PublicIP(name, kind, ipv6), nil)
	if err != nil {
		return "", fmt.Errorf("public IP %s: %w", PIPName(name), err)
	}
	res, err := p.PollUntilDone(ctx, a.poll())
	if err != nil {
		return "", fmt.Errorf("public IP %s: %w", PIPName(name), err)
	}
	if res.Properties == nil || res.Properties.IPAddress == nil {
		return "", fmt.Errorf("public IP %s has no address yet", PIPName(name))
	}
	return *res.Properties.IPAddress, nil
}

// EnsureLB writes the load balancer of an inbound service.
func (a *Azure) EnsureLB(ctx context.Context, name string, spec InboundSpec) error {
	p, err := a.Network.NewLoadBalancersClient().BeginCreateOrUpdate(ctx, a.Scope.ResourceGroup, name, a.Scope.LoadBalancer(name, spec), nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, a.poll())
	}
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", name, err)
	}
	return nil
}

// EnsureNAT writes the NAT gateway of an egress identity.
func (a *Azure) EnsureNAT(ctx context.Context, name string) error {
	p, err := a.Network.NewNatGatewaysClient().BeginCreateOrUpdate(ctx, a.Scope.ResourceGroup, name, a.Scope.NATGateway(name), nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, a.poll())
	}
	if err != nil {
		return fmt.Errorf("NAT gateway %s: %w", name, err)
	}
	return nil
}

// Delete removes a load balancer, NAT gateway or public IP by type ("lb", "nat", "pip");
// one that is already gone counts as deleted.
func (a *Azure) Delete(ctx context.Context, typ, name string) error {
	var err error
	switch typ {
	case "lb":
		var p *runtime.Poller[armnetwork.LoadBalancersClientDeleteResponse]
		if p, err = a.Network.NewLoadBalancersClient().BeginDelete(ctx, a.Scope.ResourceGroup, name, nil); err == nil {
			_, err = p.PollUntilDone(ctx, a.poll())
		}
	case "nat":
		var p *runtime.Poller[armnetwork.NatGatewaysClientDeleteResponse]
		if p, err = a.Network.NewNatGatewaysClient().BeginDelete(ctx, a.Scope.ResourceGroup, name, nil); err == nil {
			_, err = p.PollUntilDone(ctx, a.poll())
		}
	case "pip":
		var p *runtime.Poller[armnetwork.PublicIPAddressesClientDeleteResponse]
		if p, err = a.Network.NewPublicIPAddressesClient().BeginDelete(ctx, a.Scope.ResourceGroup, name, nil); err == nil {
			_, err = p.PollUntilDone(ctx, a.poll())
		}
	default:
		return fmt.Errorf("unknown resource type %q", typ)
	}
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", typ, name, err)
	}
	return nil
}
