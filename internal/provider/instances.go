package provider

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// instances implements cloudprovider.InstancesV2.
type instances struct{ c *Cloud }

// InstanceExists is true for on-prem nodes (they must never be deleted by the lifecycle
// controller) and for nodes whose VM exists.
func (i *instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	if nodes.IsUnmanaged(node) {
		return true, nil
	}
	_, err := i.c.Resolver.Instance(ctx, node)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		klog.V(2).InfoS("Node has no VM", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return true, nil
}

// InstanceShutdown is true when the VM is stopped, deallocated or deallocating; never for
// on-prem nodes.
func (i *instances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	if nodes.IsUnmanaged(node) {
		return false, nil
	}
	inst, err := i.c.Resolver.Instance(ctx, node)
	if err != nil {
		return false, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return inst.IsShutdown(), nil
}

// InstanceMetadata returns providerID, instance type, addresses, zone and region. On-prem nodes
// get only their providerID azure://<node-name>; nothing in Azure is called for them.
func (i *instances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if nodes.IsUnmanaged(node) {
		pid := node.Spec.ProviderID
		if pid == "" {
			pid = nodes.UnmanagedProviderID(node.Name)
		}
		return &cloudprovider.InstanceMetadata{ProviderID: pid}, nil
	}
	inst, err := i.c.Resolver.Instance(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	addrs, err := i.c.Resolver.Addresses(ctx, inst, node.Name)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	zone, region, err := inst.Zone()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    inst.ProviderID.String(),
		InstanceType:  inst.VMSize,
		NodeAddresses: addrs,
		Zone:          zone,
		Region:        region,
	}, nil
}
