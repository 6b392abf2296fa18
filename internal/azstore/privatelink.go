package azstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

// PrivateLinkService is the store of one private link service. Deleting it first removes its
// private endpoint connections, which Azure requires.
type PrivateLinkService struct {
	Client        *armnetwork.PrivateLinkServicesClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *PrivateLinkService) Get(ctx context.Context) (*armnetwork.PrivateLinkService, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.PrivateLinkService, etagOf(resp.Etag), nil
}

// Put implements writer.Store. Read-only properties read from Azure are not sent back.
func (s *PrivateLinkService) Put(ctx context.Context, obj *armnetwork.PrivateLinkService, etag string) (*armnetwork.PrivateLinkService, string, error) {
	if p := obj.Properties; p != nil {
		p.Alias, p.NetworkInterfaces, p.PrivateEndpointConnections, p.ProvisioningState = nil, nil, nil, nil
	}
	ctx = conditional(ctx, etag)
	if etag == "" {
		// Two writers (two CCMs during a leader change) must not both create it.
		ctx = policy(ctx, "If-None-Match", "*")
	}
	p, err := s.Client.BeginCreateOrUpdate(ctx, s.ResourceGroup, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.PrivateLinkService, etagOf(resp.Etag), nil
}

// Delete implements writer.Store: the private endpoint connections, then the service. The
// connections are those Azure has now; the service is then deleted only if nothing changed it
// since the writer read it (its ETag after the connection deletes is checked again).
func (s *PrivateLinkService) Delete(ctx context.Context, etag string) error {
	cur, curETag, err := s.Get(ctx)
	if err != nil || cur == nil {
		return err
	}
	if etag != "" && curETag != etag {
		return &azcore.ResponseError{StatusCode: http.StatusPreconditionFailed, ErrorCode: "PreconditionFailed"}
	}
	if cur.Properties != nil && len(cur.Properties.PrivateEndpointConnections) > 0 {
		for _, c := range cur.Properties.PrivateEndpointConnections {
			if c == nil || c.Name == nil {
				continue
			}
			p, err := s.Client.BeginDeletePrivateEndpointConnection(ctx, s.ResourceGroup, s.Name, *c.Name, nil)
			if arm.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("deleting private endpoint connection %s: %w", *c.Name, err)
			}
			if _, err := p.PollUntilDone(ctx, poll(s.PollFrequency)); err != nil {
				return fmt.Errorf("deleting private endpoint connection %s: %w", *c.Name, err)
			}
		}
		// The connection deletes gave the service a new ETag.
		if _, curETag, err = s.Get(ctx); err != nil {
			return err
		}
	}
	p, err := s.Client.BeginDelete(conditional(ctx, curETag), s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, poll(s.PollFrequency))
	return err
}

// Subnet is the store of one subnet (the NAT subnet of private link services). The provider
// never creates or deletes subnets; it only changes properties of existing ones.
type Subnet struct {
	Client        *armnetwork.SubnetsClient
	ResourceGroup string
	VNet, Name    string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *Subnet) Get(ctx context.Context) (*armnetwork.Subnet, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.VNet, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.Subnet, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *Subnet) Put(ctx context.Context, obj *armnetwork.Subnet, etag string) (*armnetwork.Subnet, string, error) {
	if etag == "" {
		return nil, "", errors.New("subnet " + s.Name + " does not exist; the provider does not create subnets")
	}
	p, err := s.Client.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.VNet, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.Subnet, etagOf(resp.Etag), nil
}

// Delete implements writer.Store; deleting a subnet is refused.
func (s *Subnet) Delete(context.Context, string) error {
	return errors.New("the provider never deletes subnet " + s.Name)
}
