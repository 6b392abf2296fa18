// Package azstore adapts the ARM SDK clients to writer.Store: one store per kind of Azure resource
// the CCM writes (load balancer with its backend pools, NSG, public IP, route table, NIC, scale
// set, scale set VM). Writes are conditional: If-Match carries the ETag read
// last, so a concurrent change by anyone else fails with 412 and the writer re-reads.
package azstore

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	azpolicy "github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// policy adds one request header.
func policy(ctx context.Context, key, value string) context.Context {
	return azpolicy.WithHTTPHeader(ctx, http.Header{key: []string{value}})
}

// conditional adds If-Match for an existing resource.
func conditional(ctx context.Context, etag string) context.Context {
	if etag == "" {
		return ctx
	}
	return azpolicy.WithHTTPHeader(ctx, http.Header{"If-Match": []string{etag}})
}

func poll(freq time.Duration) *runtime.PollUntilDoneOptions {
	if freq <= 0 {
		freq = 5 * time.Second
	}
	return &runtime.PollUntilDoneOptions{Frequency: freq}
}

func etagOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// LoadBalancer is the store of one load balancer. Its backend pools are children with their own
// API (writer.ChildStore): a batch that changed one pool alone writes that pool, not the whole
// load balancer.
type LoadBalancer struct {
	Client *armnetwork.LoadBalancersClient
	// Pools writes single backend pools.
	Pools         *armnetwork.LoadBalancerBackendAddressPoolsClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
	// Raw, when set, carries the load balancer's GET and PUT (ID names it) with armjson instead
	// of Client: a load balancer holds an address per node, and the SDK's generated JSON
	// methods hold tens of megabytes per document of a large cluster while they work.
	Raw *RawClient
	ID  string
}

var _ writer.ChildStore[armnetwork.LoadBalancer] = (*LoadBalancer)(nil)

// Get implements writer.Store.
func (s *LoadBalancer) Get(ctx context.Context) (*armnetwork.LoadBalancer, string, error) {
	if s.Raw != nil {
		var lb armnetwork.LoadBalancer
		found, err := s.Raw.Get(ctx, s.ID, NetworkAPIVersion, &lb)
		if err != nil || !found {
			return nil, "", err
		}
		return &lb, etagOf(lb.Etag), nil
	}
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.LoadBalancer, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *LoadBalancer) Put(ctx context.Context, obj *armnetwork.LoadBalancer, etag string) (*armnetwork.LoadBalancer, string, error) {
	trimSubnets(obj)
	if s.Raw != nil {
		var lb armnetwork.LoadBalancer
		if err := s.Raw.Put(ctx, s.ID, NetworkAPIVersion, etag, obj, &lb, poll(s.PollFrequency)); err != nil {
			return nil, "", err
		}
		return &lb, etagOf(lb.Etag), nil
	}
	p, err := s.Client.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.LoadBalancer, etagOf(resp.Etag), nil
}

// Delete implements writer.Store.
func (s *LoadBalancer) Delete(ctx context.Context, etag string) error {
	p, err := s.Client.BeginDelete(conditional(ctx, etag), s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, poll(s.PollFrequency))
	return err
}

// PoolMigrator is a load balancer store that can turn NIC-based backend pools into IP-based ones
// in place (the load balancer's migrateToIpBased action).
type PoolMigrator interface {
	MigrateToIPBased(ctx context.Context, pools []string) ([]string, error)
}

var _ PoolMigrator = (*LoadBalancer)(nil)

// MigrateToIPBased calls migrateToIpBased for the named pools and returns the pools Azure says
// it migrated. It is run through the load balancer's writer (writer.Writer.Do), never beside it.
func (s *LoadBalancer) MigrateToIPBased(ctx context.Context, pools []string) ([]string, error) {
	names := make([]*string, 0, len(pools))
	for _, p := range pools {
		names = append(names, &p)
	}
	resp, err := s.Client.MigrateToIPBased(ctx, s.ResourceGroup, s.Name, &armnetwork.LoadBalancersClientMigrateToIPBasedOptions{
		Parameters: &armnetwork.MigrateLoadBalancerToIPBasedRequest{Pools: names}})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range resp.MigratedPools.MigratedPools {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out, nil
}

// OnlyChildChanged implements writer.ChildStore: work differs from cur in the backend pool pool
// alone. The comparison skips the pool by position, so it costs no copy of the load balancer.
func (s *LoadBalancer) OnlyChildChanged(cur, work *armnetwork.LoadBalancer, pool string) bool {
	return s.Pools != nil && OnlyPoolChanged(cur, work, pool)
}

// OnlyPoolChanged reports whether work differs from cur in the backend pool pool alone (and
// the pool exists in both): a batch that can be written with the pool's own API.
func OnlyPoolChanged(cur, work *armnetwork.LoadBalancer, pool string) bool {
	if cur.Properties == nil || work.Properties == nil {
		return false
	}
	ci, wi := poolIndex(cur, pool), poolIndex(work, pool)
	cp, wp := cur.Properties.BackendAddressPools, work.Properties.BackendAddressPools
	if ci < 0 || wi < 0 || ci != wi || len(cp) != len(wp) {
		return false
	}
	for i := range cp {
		if i != ci && !writer.DeepEqual(cp[i], wp[i]) {
			return false
		}
	}
	// Everything but the pools: compare shallow copies that share every other field.
	c, w := *cur, *work
	cprops, wprops := *cur.Properties, *work.Properties
	cprops.BackendAddressPools, wprops.BackendAddressPools = nil, nil
	c.Properties, w.Properties = &cprops, &wprops
	return writer.DeepEqual(&c, &w)
}

// PutChild implements writer.ChildStore: one PUT of the backend pool, If-Match the load
// balancer's ETag (a pool carries its load balancer's).
func (s *LoadBalancer) PutChild(ctx context.Context, work *armnetwork.LoadBalancer, pool, etag string) (*armnetwork.LoadBalancer, error) {
	i := poolIndex(work, pool)
	if i < 0 {
		return nil, errors.New("backend pool " + pool + " is not on load balancer " + s.Name)
	}
	if s.Raw != nil {
		var stored armnetwork.BackendAddressPool
		id := s.ID + "/backendAddressPools/" + url.PathEscape(pool)
		if err := s.Raw.Put(ctx, id, NetworkAPIVersion, etag, work.Properties.BackendAddressPools[i], &stored, poll(s.PollFrequency)); err != nil {
			return nil, err
		}
		work.Properties.BackendAddressPools[i] = &stored
		return work, nil
	}
	p, err := s.Pools.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.Name, pool, *work.Properties.BackendAddressPools[i], nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, err
	}
	work.Properties.BackendAddressPools[i] = &resp.BackendAddressPool
	return work, nil
}

func poolIndex(lb *armnetwork.LoadBalancer, name string) int {
	for i, p := range lb.Properties.BackendAddressPools {
		if p != nil && p.Name != nil && strings.EqualFold(*p.Name, name) {
			return i
		}
	}
	return -1
}

// trimSubnets sends frontend subnets as bare references, as ARM returns whole subnet objects
// that must not be written back.
func trimSubnets(lb *armnetwork.LoadBalancer) {
	if lb.Properties == nil {
		return
	}
	for _, f := range lb.Properties.FrontendIPConfigurations {
		if f.Properties != nil && f.Properties.Subnet != nil {
			f.Properties.Subnet = &armnetwork.Subnet{ID: f.Properties.Subnet.ID}
		}
	}
}

// SecurityGroup is the store of one NSG. The provider never creates or deletes NSGs.
type SecurityGroup struct {
	Client        *armnetwork.SecurityGroupsClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
	// Raw, when set, carries the GET and PUT (ID names the NSG) with armjson, as for load
	// balancers: a rule per service makes a large document.
	Raw *RawClient
	ID  string
}

// Get implements writer.Store.
func (s *SecurityGroup) Get(ctx context.Context) (*armnetwork.SecurityGroup, string, error) {
	if s.Raw != nil {
		var sg armnetwork.SecurityGroup
		found, err := s.Raw.Get(ctx, s.ID, NetworkAPIVersion, &sg)
		if err != nil || !found {
			return nil, "", err
		}
		return &sg, etagOf(sg.Etag), nil
	}
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.SecurityGroup, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *SecurityGroup) Put(ctx context.Context, obj *armnetwork.SecurityGroup, etag string) (*armnetwork.SecurityGroup, string, error) {
	if etag == "" {
		return nil, "", errors.New("network security group " + s.Name + " does not exist; the provider does not create it")
	}
	if s.Raw != nil {
		var sg armnetwork.SecurityGroup
		if err := s.Raw.Put(ctx, s.ID, NetworkAPIVersion, etag, obj, &sg, poll(s.PollFrequency)); err != nil {
			return nil, "", err
		}
		return &sg, etagOf(sg.Etag), nil
	}
	p, err := s.Client.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.SecurityGroup, etagOf(resp.Etag), nil
}

// Delete implements writer.Store; deleting the NSG is refused.
func (s *SecurityGroup) Delete(context.Context, string) error {
	return errors.New("the provider never deletes network security group " + s.Name)
}

// PublicIP is the store of one public IP address.
type PublicIP struct {
	Client        *armnetwork.PublicIPAddressesClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *PublicIP) Get(ctx context.Context) (*armnetwork.PublicIPAddress, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.PublicIPAddress, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
// A create carries If-None-Match: * — the writer may know the address is missing only from a
// list, and a public IP made since must not be overwritten.
func (s *PublicIP) Put(ctx context.Context, obj *armnetwork.PublicIPAddress, etag string) (*armnetwork.PublicIPAddress, string, error) {
	if etag == "" {
		ctx = policy(ctx, "If-None-Match", "*")
	} else {
		ctx = conditional(ctx, etag)
	}
	p, err := s.Client.BeginCreateOrUpdate(ctx, s.ResourceGroup, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.PublicIPAddress, etagOf(resp.Etag), nil
}

// Delete implements writer.Store.
func (s *PublicIP) Delete(ctx context.Context, etag string) error {
	p, err := s.Client.BeginDelete(conditional(ctx, etag), s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, poll(s.PollFrequency))
	return err
}

// RouteTable is the store of one route table. The table is created when missing, with
// If-None-Match: * so that two writers can never both create it.
type RouteTable struct {
	Client        *armnetwork.RouteTablesClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *RouteTable) Get(ctx context.Context) (*armnetwork.RouteTable, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.RouteTable, etagOf(resp.Etag), nil
}

// Put implements writer.Store. Read-only fields of a table read from Azure are not sent back.
func (s *RouteTable) Put(ctx context.Context, obj *armnetwork.RouteTable, etag string) (*armnetwork.RouteTable, string, error) {
	if obj.Properties != nil {
		obj.Properties.Subnets, obj.Properties.ProvisioningState, obj.Properties.ResourceGUID = nil, nil, nil
	}
	if etag == "" {
		ctx = policy(ctx, "If-None-Match", "*")
	} else {
		ctx = conditional(ctx, etag)
	}
	p, err := s.Client.BeginCreateOrUpdate(ctx, s.ResourceGroup, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.RouteTable, etagOf(resp.Etag), nil
}

// Delete implements writer.Store; the provider never deletes the route table.
func (s *RouteTable) Delete(context.Context, string) error {
	return errors.New("the provider never deletes route table " + s.Name)
}
