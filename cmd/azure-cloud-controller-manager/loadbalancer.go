package main

import (
	cloudprovider "k8s.io/cloud-provider"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

// installLoadBalancer plugs the load balancer implementation into the provider.
func installLoadBalancer() {
	provider.SetLoadBalancerBuilder(func(d provider.LoadBalancerDeps) (cloudprovider.LoadBalancer, error) {
		o := loadbalancer.Options{
			Config:        d.Config,
			Network:       d.Clients.Network,
			PollFrequency: d.Clients.PollFrequency,
			Zones:         d.Zones,
			Recorder:      d.Recorder,
			ListPublicIPs: d.Clients.Caches.PublicIPs.Get,
			InvalidatePublicIPs: func(rg string) {
				d.Clients.Caches.PublicIPs.Invalidate(rg)
			},
			// nodeIPConfiguration pools: nodes are resolved to NIC / scale set VM ip
			// configurations through the resolver's list caches, which membership writes drop.
			Nodes:       d.Nodes,
			Compute:     d.Clients.Compute,
			NodeNetwork: d.Clients.NodeNetwork,
			Caches:      d.Clients.Caches,
		}
		if d.Informers != nil {
			o.Services = d.Informers.Core().V1().Services().Lister()
		}
		return loadbalancer.New(o)
	})
}
