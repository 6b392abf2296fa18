package azstore

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

// The stores below hold the node-side resources that nodeIPConfiguration backend pools are
// written through: NICs, Uniform scale set instances and scale set models. The provider never
// creates or deletes them; it only edits pool references.

// Interface is the store of one network interface.
type Interface struct {
	Client        *armnetwork.InterfacesClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *Interface) Get(ctx context.Context) (*armnetwork.Interface, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.Interface, etagOf(resp.Etag), nil
}

// Put implements writer.Store: the whole NIC, with references sent as bare IDs (ARM returns
// expanded subnets and public IPs that must not be written back).
func (s *Interface) Put(ctx context.Context, obj *armnetwork.Interface, etag string) (*armnetwork.Interface, string, error) {
	if etag == "" {
		return nil, "", errors.New("network interface " + s.Name + " does not exist; the provider does not create it")
	}
	trimNIC(obj)
	p, err := s.Client.BeginCreateOrUpdate(conditional(ctx, etag), s.ResourceGroup, s.Name, *obj, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.Interface, etagOf(resp.Etag), nil
}

// Delete implements writer.Store; deleting a NIC is refused.
func (s *Interface) Delete(context.Context, string) error {
	return errors.New("the provider never deletes network interface " + s.Name)
}

func trimNIC(nic *armnetwork.Interface) {
	if nic.Properties == nil {
		return
	}
	for _, c := range nic.Properties.IPConfigurations {
		if c == nil || c.Properties == nil {
			continue
		}
		if c.Properties.Subnet != nil {
			c.Properties.Subnet = &armnetwork.Subnet{ID: c.Properties.Subnet.ID}
		}
		if c.Properties.PublicIPAddress != nil {
			c.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: c.Properties.PublicIPAddress.ID}
		}
		for i, p := range c.Properties.LoadBalancerBackendAddressPools {
			if p != nil {
				c.Properties.LoadBalancerBackendAddressPools[i] = &armnetwork.BackendAddressPool{ID: p.ID}
			}
		}
	}
}

// ScaleSetVM is the store of one Uniform scale set instance. Put sends the partial body the
// existing provider sends (location, hardware profile, network profile configuration) with
// If-Match: ARM merges it into the instance.
type ScaleSetVM struct {
	Client        *armcompute.VirtualMachineScaleSetVMsClient
	ResourceGroup string
	ScaleSet      string
	InstanceID    string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *ScaleSetVM) Get(ctx context.Context) (*armcompute.VirtualMachineScaleSetVM, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.ScaleSet, s.InstanceID, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.VirtualMachineScaleSetVM, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *ScaleSetVM) Put(ctx context.Context, obj *armcompute.VirtualMachineScaleSetVM, etag string) (*armcompute.VirtualMachineScaleSetVM, string, error) {
	if etag == "" && obj.Etag == nil {
		return nil, "", errors.New("scale set VM " + s.ScaleSet + "/" + s.InstanceID + " does not exist")
	}
	body := armcompute.VirtualMachineScaleSetVM{Location: obj.Location, Properties: &armcompute.VirtualMachineScaleSetVMProperties{}}
	if obj.Properties != nil {
		body.Properties.HardwareProfile = obj.Properties.HardwareProfile
		body.Properties.NetworkProfileConfiguration = obj.Properties.NetworkProfileConfiguration
	}
	var opts *armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions
	if etag != "" {
		opts = &armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions{IfMatch: to.Ptr(etag)}
	}
	p, err := s.Client.BeginUpdate(ctx, s.ResourceGroup, s.ScaleSet, s.InstanceID, body, opts)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.VirtualMachineScaleSetVM, etagOf(resp.Etag), nil
}

// Delete implements writer.Store; deleting an instance is refused.
func (s *ScaleSetVM) Delete(context.Context, string) error {
	return errors.New("the provider never deletes scale set VM " + s.ScaleSet + "/" + s.InstanceID)
}

// ScaleSet is the store of one scale set model. Put sends only the network interface
// configurations (with If-Match), as the existing provider does.
type ScaleSet struct {
	Client        *armcompute.VirtualMachineScaleSetsClient
	ResourceGroup string
	Name          string
	PollFrequency time.Duration
}

// Get implements writer.Store.
func (s *ScaleSet) Get(ctx context.Context) (*armcompute.VirtualMachineScaleSet, string, error) {
	resp, err := s.Client.Get(ctx, s.ResourceGroup, s.Name, nil)
	if arm.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &resp.VirtualMachineScaleSet, etagOf(resp.Etag), nil
}

// Put implements writer.Store.
func (s *ScaleSet) Put(ctx context.Context, obj *armcompute.VirtualMachineScaleSet, etag string) (*armcompute.VirtualMachineScaleSet, string, error) {
	if etag == "" {
		return nil, "", errors.New("scale set " + s.Name + " does not exist; the provider does not create it")
	}
	body := armcompute.VirtualMachineScaleSet{Location: obj.Location, ExtendedLocation: obj.ExtendedLocation,
		Properties: &armcompute.VirtualMachineScaleSetProperties{VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
			NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{}}}}
	if obj.Properties != nil && obj.Properties.VirtualMachineProfile != nil && obj.Properties.VirtualMachineProfile.NetworkProfile != nil {
		body.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations =
			obj.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations
	}
	p, err := s.Client.BeginCreateOrUpdate(ctx, s.ResourceGroup, s.Name, body,
		&armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions{IfMatch: to.Ptr(etag)})
	if err != nil {
		return nil, "", err
	}
	resp, err := p.PollUntilDone(ctx, poll(s.PollFrequency))
	if err != nil {
		return nil, "", err
	}
	return &resp.VirtualMachineScaleSet, etagOf(resp.Etag), nil
}

// Delete implements writer.Store; deleting a scale set is refused.
func (s *ScaleSet) Delete(context.Context, string) error {
	return errors.New("the provider never deletes scale set " + s.Name)
}
