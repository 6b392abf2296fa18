package main

import (
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	cloudprovider "k8s.io/cloud-provider"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	_ "github.com/azure-ccm/azure-ccm/internal/loadbalancer/localpools" // local-pools controller (multiple load balancers)
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway"
)

// defaultConcurrentServiceSyncs replaces the upstream default of --concurrent-service-syncs (1).
// Workers mostly wait on group-commit writers, and a load balancer or NSG write carries the
// changes of every worker waiting on it: 50 workers let a burst of services share a few writes
// (test/bench TestLoadBalancerBurst).
const defaultConcurrentServiceSyncs = 50

// --kube-api-qps / --kube-api-burst defaults (upstream 20 / 30), see main.
const (
	defaultKubeAPIQPS   = 50
	defaultKubeAPIBurst = 100
)

// disableLBWriteMerging is set by the hidden --disable-lb-write-merging flag: every load
// balancer, NSG, public IP and pool change becomes its own read-modify-write. It exists only so
// that the burst benchmark (test/bench) can measure the baseline of one write per service in the
// same run; nobody should run a cluster with it.
var disableLBWriteMerging bool

// benchmarkFlags are the CCM's own hidden flags.
func benchmarkFlags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("azure load balancer")
	fs.BoolVar(&disableLBWriteMerging, "disable-lb-write-merging", false,
		"benchmark baseline only: one ARM write per load balancer change, no merging")
	_ = fs.MarkHidden("disable-lb-write-merging")
	return fss
}

// installLoadBalancer plugs the load balancer implementation into the provider.
func installLoadBalancer() {
	provider.SetLoadBalancerBuilder(func(d provider.LoadBalancerDeps) (cloudprovider.LoadBalancer, error) {
		if servicegateway.Enabled(d.Config) { // the service-gateway controller serves every Service
			return servicegateway.ElsewhereLoadBalancer{}, nil
		}
		o := loadbalancer.Options{
			Config:        d.Config,
			Network:       d.Clients.Network,
			PollFrequency: d.Clients.PollFrequency,
			Zones:         d.Zones,
			Recorder:      d.Recorder,
			// Read when the provider is built, after flag parsing.
			DisableWriteMerging: disableLBWriteMerging,
			ListPublicIPs:       d.Clients.Caches.PublicIPs.Get,
			RefreshPublicIPs:    d.Clients.Caches.PublicIPs.Refresh,
			InvalidatePublicIPs: func(rg string) {
				d.Clients.Caches.PublicIPs.Invalidate(rg)
			},
			PublicIPWritten: func(rg, name string, stored *armnetwork.PublicIPAddress) {
				d.Clients.Caches.PublicIPs.Update(rg, func(items []*armnetwork.PublicIPAddress) []*armnetwork.PublicIPAddress {
					return loadbalancer.ReplacePublicIP(items, name, stored)
				})
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
			// Namespace labels only matter to serviceNamespaceSelector: no namespace informer
			// (nor its RBAC) without one.
			for _, m := range d.Config.MultipleStandardLoadBalancerConfigurations {
				if m.ServiceNamespaceSelector != nil {
					o.Namespaces = d.Informers.Core().V1().Namespaces().Lister()
					break
				}
			}
		}
		lb, err := loadbalancer.New(o)
		if err != nil {
			return nil, err
		}
		migrateBeforeServing(d, lb) // Basic → Standard, once per start (migration.go)
		return lb, nil
	})
}
