// Package nodemanager is the node-side agent's work (cmd/azure-cloud-node-manager): it learns
// what its Node should carry — from the instance metadata service of the VM it runs on, or from
// ARM with the cluster's azure.json — and writes it to the Node: providerID, labels, addresses,
// the uninitialized taint removed and, with WaitRoutes, NetworkUnavailable=True until the route
// controller has programmed the node's route.
package nodemanager

import (
	"context"
	"net/http"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// Source tells what a node should carry.
type Source interface {
	Metadata(ctx context.Context, node *v1.Node) (nodes.NodeMetadata, error)
	// Name says where the metadata comes from (logs).
	Name() string
}

// IMDS reads the instance metadata service of the VM the agent runs on.
type IMDS struct {
	// Client must not use a proxy (IMDS is link-local).
	Client   *http.Client
	Endpoint string
}

// Metadata implements Source.
func (s IMDS) Metadata(ctx context.Context, node *v1.Node) (nodes.NodeMetadata, error) {
	doc, err := nodes.FetchIMDS(ctx, s.Client, s.Endpoint)
	if err != nil {
		return nodes.NodeMetadata{}, err
	}
	return nodes.MetadataFromIMDS(doc, node.Name)
}

// Name implements Source.
func (IMDS) Name() string { return "instance metadata" }

// ARM resolves the node to its VM through ARM (the CCM's resolver: by providerID, else by node
// name in the node's resource group).
type ARM struct {
	Resolver *nodes.Resolver
}

// Metadata implements Source.
func (s ARM) Metadata(ctx context.Context, node *v1.Node) (nodes.NodeMetadata, error) {
	return s.Resolver.Metadata(ctx, node)
}

// Name implements Source.
func (ARM) Name() string { return "ARM" }
