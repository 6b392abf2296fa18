package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// instances implements cloudprovider.InstancesV2.
type instances struct{ c *Cloud }

// InstanceExists is true for on-prem nodes (they must never be deleted by the lifecycle
// controller), for nodes whose VM exists, and for nodes without a VM that are younger than
// nodeInstanceNotFoundGracePeriodInSeconds: a VM that registered its node before ARM lists it
// must not lose its node.
func (i *instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	if nodes.IsUnmanaged(node) {
		return true, nil
	}
	_, err := i.c.Resolver.Instance(ctx, node)
	if errors.Is(err, nodes.ErrInstanceNotFound) {
		grace := time.Duration(i.c.Config.NodeInstanceNotFoundGracePeriodInSeconds) * time.Second
		if age, ok := withinNotFoundGrace(node.CreationTimestamp.Time, time.Now(), grace); ok {
			klog.V(2).InfoS("Node has no VM yet; kept within nodeInstanceNotFoundGracePeriodInSeconds", "node", klog.KObj(node),
				"providerID", node.Spec.ProviderID, "age", age.Round(time.Second), "gracePeriod", grace)
			i.c.reportNotFoundGrace(node, age, grace)
			return true, nil
		}
		klog.V(2).InfoS("Node has no VM", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return true, nil
}

// withinNotFoundGrace reports whether a node created at created is, at now, still within the
// grace period (a zero creation time or grace never is), and its age.
func withinNotFoundGrace(created, now time.Time, grace time.Duration) (time.Duration, bool) {
	if grace <= 0 || created.IsZero() {
		return 0, false
	}
	age := now.Sub(created)
	return age, age < grace
}

// InstanceShutdown is true when the VM is stopped, deallocated or deallocating; never for
// on-prem nodes, nor for nodes without a VM (InstanceExists decides about those).
func (i *instances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	if nodes.IsUnmanaged(node) {
		return false, nil
	}
	inst, err := i.c.Resolver.Instance(ctx, node)
	if errors.Is(err, nodes.ErrInstanceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return inst.IsShutdown(), nil
}

// InstanceMetadata returns providerID, instance type, addresses, zone and region. On-prem nodes
// get only their providerID azure://<node-name>; nothing in Azure is called for them.
func (i *instances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	md, err := i.c.Resolver.Metadata(ctx, node)
	if errors.Is(err, nodes.ErrInstanceNotFound) {
		// The cloud-provider controllers compare with their own sentinel.
		return nil, fmt.Errorf("node %s: %w: %w", node.Name, cloudprovider.InstanceNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    md.ProviderID,
		InstanceType:  md.InstanceType,
		NodeAddresses: md.Addresses,
		Zone:          md.Zone,
		Region:        md.Region,
	}, nil
}
