package updater

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/difftracker"
)

// Azure is the ARM side of the updater: the gateway actions and the service resources. Every
// method makes one attempt (a resource write re-reads and writes again after a 412, see put);
// retrying after other failures is the updater's job.
//
// Resource writes (PUT and DELETE of the public IPs, load balancers and NAT gateways) are
// conditional: If-Match carries the ETag last read or written, If-None-Match: * creates. The
// gateway actions (updateServices, updateAddressLocations) are not: they are POSTs of named
// partial changes to a gateway that every cluster in the VNet updates, not a read-modify-write
// of a document, so there is no lost update for an ETag to prevent, and an If-Match would make
// each cluster's call fail whenever another cluster had called since.
type Azure struct {
	Scope   Scope
	Network *armnetwork.ClientFactory
	// PollFrequency of long-running operations (default 1s).
	PollFrequency time.Duration

	mu    sync.Mutex
	known map[string]known // "lb/<name>", "nat/<name>", "pip/<name>"
}

// known is what was last read or written of one resource: the ETag for If-Match, and the
// tags (ownership, and the tags others set, which a rewrite keeps).
type known struct {
	etag string
	tags map[string]*string
}

// maxConditionalAttempts bounds the re-read-and-write loop of one write: each 412 means another
// writer changed the resource in between.
const maxConditionalAttempts = 3

func (a *Azure) lookup(key string) (known, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k, ok := a.known[key]
	return k, ok
}

func (a *Azure) remember(key string, etag *string, tags map[string]*string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.known == nil {
		a.known = map[string]known{}
	}
	k := known{tags: tags}
	if etag != nil {
		k.etag = *etag
	}
	a.known[key] = k
}

func (a *Azure) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.known, key)
}

// conditional sets If-Match to the known ETag, or If-None-Match: * when the resource is not
// known to exist (a create must not overwrite one someone else made meanwhile).
func conditional(ctx context.Context, k known, ok bool) context.Context {
	h := http.Header{}
	if ok && k.etag != "" {
		h.Set("If-Match", k.etag)
	} else if !ok {
		h.Set("If-None-Match", "*")
	}
	return policy.WithHTTPHeader(ctx, h)
}

// withOurTags is ours plus the tags others set on the resource (kept by a rewrite).
func withOurTags(ours, current map[string]*string) map[string]*string {
	out := map[string]*string{}
	for k, v := range current {
		if !strings.EqualFold(k, TagCluster) && !strings.EqualFold(k, TagKind) {
			out[k] = v
		}
	}
	maps.Copy(out, ours)
	return out
}

// ErrNoLongerOwned is Delete's answer for a resource that lost this cluster's tags since it was
// read: someone else took it over, so it is left alone.
var ErrNoLongerOwned = errors.New("no longer carries this cluster's tags: left alone")

// resourceIO is one resource's reads and writes for put and del.
type resourceIO struct {
	key, what string // "pip/<name>", "public IP <name>"
	get       func(ctx context.Context) (etag *string, tags map[string]*string, err error)
	// put writes the desired document with the given tags and returns what ARM answered.
	put func(ctx context.Context, tags map[string]*string) (etag *string, tags2 map[string]*string, err error)
	del func(ctx context.Context) error
}

// refresh re-reads the resource; false when it does not exist.
func (a *Azure) refresh(ctx context.Context, r resourceIO) (bool, error) {
	etag, tags, err := r.get(ctx)
	if arm.IsNotFound(err) {
		a.forget(r.key)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", r.what, err)
	}
	a.remember(r.key, etag, tags)
	return true, nil
}

// put writes a resource conditionally (see Azure). On 412 it re-reads the resource and writes
// again on top of what it found; a resource of that name this cluster does not own is never
// overwritten.
func (a *Azure) put(ctx context.Context, r resourceIO, ours map[string]*string) error {
	var err error
	for attempt := 0; attempt < maxConditionalAttempts; attempt++ {
		k, ok := a.lookup(r.key)
		if ok && !ownedBy(k.tags, a.Scope.ClusterName) {
			return fmt.Errorf("%s exists and is not this cluster's (tags %s=%s and %s): not overwritten", r.what, TagCluster, a.Scope.ClusterName, TagKind)
		}
		var etag *string
		var tags map[string]*string
		etag, tags, err = r.put(conditional(ctx, k, ok), withOurTags(ours, k.tags))
		if err == nil {
			a.remember(r.key, etag, tags)
			return nil
		}
		if !arm.IsPreconditionFailed(err) {
			break
		}
		klog.V(2).InfoS("Service gateway resource changed by another writer, re-reading", "resource", r.what)
		if _, rerr := a.refresh(ctx, r); rerr != nil {
			return rerr
		}
	}
	return fmt.Errorf("%s: %w", r.what, err)
}

// del deletes a resource conditionally on the ETag of the read that showed it is this
// cluster's: one that changed meanwhile is re-read first, and one that is no longer this
// cluster's (its tags were removed) is left alone.
func (a *Azure) del(ctx context.Context, r resourceIO) error {
	var err error
	for attempt := 0; attempt < maxConditionalAttempts; attempt++ {
		k, ok := a.lookup(r.key)
		if !ok {
			exists, rerr := a.refresh(ctx, r)
			if rerr != nil || !exists {
				return rerr
			}
			k, _ = a.lookup(r.key)
		}
		if !ownedBy(k.tags, a.Scope.ClusterName) {
			a.forget(r.key)
			return fmt.Errorf("%s: %w", r.what, ErrNoLongerOwned)
		}
		ictx := ctx
		if k.etag != "" {
			ictx = policy.WithHTTPHeader(ctx, http.Header{"If-Match": []string{k.etag}})
		}
		err = r.del(ictx)
		if err == nil || arm.IsNotFound(err) {
			a.forget(r.key)
			return nil
		}
		if !arm.IsPreconditionFailed(err) {
			break
		}
		a.forget(r.key)
	}
	return fmt.Errorf("delete %s: %w", r.what, err)
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
				a.remember("lb/"+*lb.Name, lb.Etag, lb.Tags)
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
				a.remember("nat/"+*n.Name, n.Etag, n.Tags)
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
				a.remember("pip/"+*p.Name, p.Etag, p.Tags)
			}
		}
	}
	return o, nil
}

// EnsurePIP writes the public IP of a service and returns its address.
func (a *Azure) EnsurePIP(ctx context.Context, name, kind string, ipv6 bool) (string, error) {
	var addr *string
	err := a.put(ctx, a.pipIO(PIPName(name), func(ctx context.Context, tags map[string]*string) (*armnetwork.PublicIPAddress, error) {
		body := a.Scope.PublicIP(name, kind, ipv6)
		body.Tags = tags
		p, err := a.Network.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, a.Scope.ResourceGroup, PIPName(name), body, nil)
		if err != nil {
			return nil, err
		}
		res, err := p.PollUntilDone(ctx, a.poll())
		if err != nil {
			return nil, err
		}
		if res.Properties != nil {
			addr = res.Properties.IPAddress
		}
		return &res.PublicIPAddress, nil
	}), a.Scope.tags(kind))
	if err != nil {
		return "", err
	}
	if addr == nil {
		return "", fmt.Errorf("public IP %s has no address yet", PIPName(name))
	}
	return *addr, nil
}

// EnsureLB writes the load balancer of an inbound service.
func (a *Azure) EnsureLB(ctx context.Context, name string, spec InboundSpec) error {
	return a.put(ctx, a.lbIO(name, func(ctx context.Context, tags map[string]*string) (*armnetwork.LoadBalancer, error) {
		body := a.Scope.LoadBalancer(name, spec)
		body.Tags = tags
		p, err := a.Network.NewLoadBalancersClient().BeginCreateOrUpdate(ctx, a.Scope.ResourceGroup, name, body, nil)
		if err != nil {
			return nil, err
		}
		res, err := p.PollUntilDone(ctx, a.poll())
		return &res.LoadBalancer, err
	}), a.Scope.tags("Inbound"))
}

// EnsureNAT writes the NAT gateway of an egress identity.
func (a *Azure) EnsureNAT(ctx context.Context, name string) error {
	return a.put(ctx, a.natIO(name, func(ctx context.Context, tags map[string]*string) (*armnetwork.NatGateway, error) {
		body := a.Scope.NATGateway(name)
		body.Tags = tags
		p, err := a.Network.NewNatGatewaysClient().BeginCreateOrUpdate(ctx, a.Scope.ResourceGroup, name, body, nil)
		if err != nil {
			return nil, err
		}
		res, err := p.PollUntilDone(ctx, a.poll())
		return &res.NatGateway, err
	}), a.Scope.tags("Outbound"))
}

// Delete removes a load balancer, NAT gateway or public IP by type ("lb", "nat", "pip");
// one that is already gone counts as deleted; one that is no longer this cluster's is left
// alone and reported as ErrNoLongerOwned.
func (a *Azure) Delete(ctx context.Context, typ, name string) error {
	switch typ {
	case "lb":
		return a.del(ctx, a.lbIO(name, nil))
	case "nat":
		return a.del(ctx, a.natIO(name, nil))
	case "pip":
		return a.del(ctx, a.pipIO(name, nil))
	}
	return fmt.Errorf("unknown resource type %q", typ)
}

func (a *Azure) pipIO(name string, write func(context.Context, map[string]*string) (*armnetwork.PublicIPAddress, error)) resourceIO {
	c := a.Network.NewPublicIPAddressesClient()
	return resourceIO{key: "pip/" + name, what: "public IP " + name,
		get: func(ctx context.Context) (*string, map[string]*string, error) {
			r, err := c.Get(ctx, a.Scope.ResourceGroup, name, nil)
			return r.Etag, r.Tags, err
		},
		put: func(ctx context.Context, tags map[string]*string) (*string, map[string]*string, error) {
			r, err := write(ctx, tags)
			if err != nil {
				return nil, nil, err
			}
			return r.Etag, r.Tags, nil
		},
		del: func(ctx context.Context) error {
			p, err := c.BeginDelete(ctx, a.Scope.ResourceGroup, name, nil)
			if err == nil {
				_, err = p.PollUntilDone(ctx, a.poll())
			}
			return err
		}}
}

func (a *Azure) lbIO(name string, write func(context.Context, map[string]*string) (*armnetwork.LoadBalancer, error)) resourceIO {
	c := a.Network.NewLoadBalancersClient()
	return resourceIO{key: "lb/" + name, what: "load balancer " + name,
		get: func(ctx context.Context) (*string, map[string]*string, error) {
			r, err := c.Get(ctx, a.Scope.ResourceGroup, name, nil)
			return r.Etag, r.Tags, err
		},
		put: func(ctx context.Context, tags map[string]*string) (*string, map[string]*string, error) {
			r, err := write(ctx, tags)
			if err != nil {
				return nil, nil, err
			}
			return r.Etag, r.Tags, nil
		},
		del: func(ctx context.Context) error {
			p, err := c.BeginDelete(ctx, a.Scope.ResourceGroup, name, nil)
			if err == nil {
				_, err = p.PollUntilDone(ctx, a.poll())
			}
			return err
		}}
}

func (a *Azure) natIO(name string, write func(context.Context, map[string]*string) (*armnetwork.NatGateway, error)) resourceIO {
	c := a.Network.NewNatGatewaysClient()
	return resourceIO{key: "nat/" + name, what: "NAT gateway " + name,
		get: func(ctx context.Context) (*string, map[string]*string, error) {
			r, err := c.Get(ctx, a.Scope.ResourceGroup, name, nil)
			return r.Etag, r.Tags, err
		},
		put: func(ctx context.Context, tags map[string]*string) (*string, map[string]*string, error) {
			r, err := write(ctx, tags)
			if err != nil {
				return nil, nil, err
			}
			return r.Etag, r.Tags, nil
		},
		del: func(ctx context.Context) error {
			p, err := c.BeginDelete(ctx, a.Scope.ResourceGroup, name, nil)
			if err == nil {
				_, err = p.PollUntilDone(ctx, a.poll())
			}
			return err
		}}
}
