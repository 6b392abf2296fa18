// Package servicegateway is container-based load balancing: LoadBalancer Services whose
// backends are pods, registered with the Azure service gateway. The controller
// (internal/controllers/servicegateway) serves these Services; this package only tells the rest
// of the CCM when the mode is on, so the node-based load balancer code leaves them alone.
package servicegateway

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// Enabled reports whether the cluster runs container-based load balancing (the three keys
// are validated together in config).
func Enabled(cfg *config.Config) bool {
	return cfg != nil && cfg.ServiceGatewayEnabled
}

// ElsewhereLoadBalancer is the cloudprovider.LoadBalancer installed when the mode is on: the
// standard service controller skips every Service (ImplementedElsewhere) and the
// service-gateway controller serves them. GetLoadBalancer says "does not exist" so that the
// service controller drops its own cleanup finalizer without waiting.
type ElsewhereLoadBalancer struct{}

var _ cloudprovider.LoadBalancer = ElsewhereLoadBalancer{}

// GetLoadBalancer implements cloudprovider.LoadBalancer.
func (ElsewhereLoadBalancer) GetLoadBalancer(context.Context, string, *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	return nil, false, nil
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer: the gateway load balancer is
// named after the Service UID.
func (ElsewhereLoadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return string(svc.UID)
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer.
func (ElsewhereLoadBalancer) EnsureLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return nil, cloudprovider.ImplementedElsewhere
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer.
func (ElsewhereLoadBalancer) UpdateLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) error {
	return cloudprovider.ImplementedElsewhere
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer.
func (ElsewhereLoadBalancer) EnsureLoadBalancerDeleted(context.Context, string, *v1.Service) error {
	return cloudprovider.ImplementedElsewhere
}
