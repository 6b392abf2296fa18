package provider

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

// The existing provider's operation names (label request of cloudprovider_azure_op_*).
const (
	opEnsureLoadBalancer        = "services_ensure_loadbalancer"
	opUpdateLoadBalancer        = "services_update_loadbalancer"
	opEnsureLoadBalancerDeleted = "services_ensure_loadbalancer_deleted"
	opCreateRoute               = "routes_create_route"
	opDeleteRoute               = "routes_delete_route"
)

// opScope is what every operation of the provider is labelled with: the cluster's resource
// group and the network subscription, as the existing provider labels them.
type opScope struct {
	m             *arm.Metrics
	resourceGroup string
	subscription  string
}

// observe records an operation that started at start; an operation another implementation
// serves (ImplementedElsewhere) is not this provider's and is not recorded.
func (s opScope) observe(request, source string, start time.Time, err error) {
	if errors.Is(err, cloudprovider.ImplementedElsewhere) {
		return
	}
	s.m.ObserveOperation(request, s.resourceGroup, s.subscription, source, time.Since(start), err)
}

func (c *Cloud) opScope() opScope {
	var m *arm.Metrics
	if c.Clients != nil {
		m = c.Clients.Metrics
	}
	return opScope{m: m, resourceGroup: c.Config.ResourceGroup, subscription: c.Config.NetworkSubscriptionID()}
}

// measuredLoadBalancer records each service operation of the load balancer implementation.
type measuredLoadBalancer struct {
	cloudprovider.LoadBalancer
	scope opScope
}

func serviceSource(svc *v1.Service) string { return svc.Namespace + "/" + svc.Name }

// EnsureLoadBalancer implements cloudprovider.LoadBalancer.
func (l measuredLoadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	start := time.Now()
	st, err := l.LoadBalancer.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	l.scope.observe(opEnsureLoadBalancer, serviceSource(svc), start, err)
	return st, err
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer.
func (l measuredLoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	start := time.Now()
	err := l.LoadBalancer.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
	l.scope.observe(opUpdateLoadBalancer, serviceSource(svc), start, err)
	return err
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer.
func (l measuredLoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	start := time.Now()
	err := l.LoadBalancer.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
	l.scope.observe(opEnsureLoadBalancerDeleted, serviceSource(svc), start, err)
	return err
}
