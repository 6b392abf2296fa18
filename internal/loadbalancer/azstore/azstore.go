// Package azstore adapts the ARM SDK clients to writer.Store: one store per Azure resource (load
// balancer, NSG, public IP, backend pool). Writes are conditional: If-Match carries the ETag read
// last, so a concurrent change by anyone else fails with 412 and the writer re-reads.
package azstore

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// IsNotFound reports an ARM 404.
func IsNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// conditional adds If-Match for an existing resource.
func conditional(ctx context.Context, etag string) context.Context {
	if etag == "" {
		return ctx
	}
	return policy.WithHTTPHeader(ctx, http.Header{"If-Match": []string{etag}})
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

// LoadBalancer is the store of one load balancer.
type LoadBalancer struct {
	Client        *armnetwork.LoadBalancersClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *LoadBalancer) Get(ctx context.Context) (*armnetwork.LoadBalancer, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if IsNotFound(err) {
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
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, poll(s.PollFrequency))
	return err
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
}

// Get implements writer.Store.
func (s *SecurityGroup) Get(ctx context.Context) (*armnetwork.SecurityGroup, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if IsNotFound(err) {
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
	if IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.PublicIPAddress, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *PublicIP) Put(ctx context.Context, obj *armnetwork.PublicIPAddress, etag string) (*armnetwork.PublicIPAddress, string, error) {
	p, err := s.Client.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.Name, *obj, nil)
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
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, poll(s.PollFrequency))
	return err
}

// BackendPool is the store of one backend address pool (used for nodeIP pools, whose members
// are addresses written through the backendAddressPools API).
type BackendPool struct {
	Client        *armnetwork.LoadBalancerBackendAddressPoolsClient
	ResourceGroup string
	LoadBalancer  string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *BackendPool) Get(ctx context.Context) (*armnetwork.BackendAddressPool, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.LoadBalancer, s.Name, nil)
	if IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.BackendAddressPool, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *BackendPool) Put(ctx context.Context, obj *armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, string, error) {
	p, err := s.Client.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.LoadBalancer, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.BackendAddressPool, etagOf(resp.Etag), nil
}

// Delete implements writer.Store.
func (s *BackendPool) Delete(ctx context.Context, etag string) error {
	p, err := s.Client.BeginDelete(conditional(ctx, etag), s.ResourceGroup, s.LoadBalancer, s.Name, nil)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, poll(s.PollFrequency))
	return err
}
