package nodes

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// Metadata is what ARM says a node should carry (the CCM's InstanceMetadata and the node
// manager's ARM mode): providerID, instance type, addresses, zone and region. On-prem nodes get
// only their providerID (the one they have, else azure://<node-name>) and cost no ARM call.
func (r *Resolver) Metadata(ctx context.Context, node *v1.Node) (NodeMetadata, error) {
	if IsUnmanaged(node) {
		pid := node.Spec.ProviderID
		if pid == "" {
			pid = UnmanagedProviderID(node.Name)
		}
		return NodeMetadata{ProviderID: pid}, nil
	}
	inst, err := r.Instance(ctx, node)
	if err != nil {
		return NodeMetadata{}, err
	}
	addrs, err := r.Addresses(ctx, inst, node.Name)
	if err != nil {
		return NodeMetadata{}, err
	}
	zone, region, err := inst.Zone()
	if err != nil {
		return NodeMetadata{}, err
	}
	return NodeMetadata{ProviderID: inst.ProviderID.String(), InstanceType: inst.VMSize, Addresses: addrs, Zone: zone, Region: region}, nil
}
