package loadbalancer

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/pipgroups"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Parts are the node-based load balancer implementation and the part of it other controllers
// drive: the placer of several load balancers (nil with one), which the Local pool updater uses.
type Parts struct {
	LoadBalancer *LoadBalancer
	Placer       *multislb.Placer
	// Writers are the writers it writes through (BuildOptions.Writers, or their dry-run
	// wrapping).
	Writers *writers.Set
}

// BuildOptions are everything the node-based implementation is assembled from. Config,
// Writers, PublicIPs and PrivateLinks are required; Nodes and Caches with NIC-based pools.
type BuildOptions struct {
	Config       *config.Config
	Writers      *writers.Set
	PublicIPs    dryrun.PublicIPLists
	PrivateLinks dryrun.PrivateLinkLists
	// Kube records private link service aliases on services (optional; never in a dry run).
	Kube     kubernetes.Interface
	Zones    []string
	Recorder record.EventRecorder
	// Services and Namespaces are listers of the shared informers (optional; Namespaces only
	// matters to serviceNamespaceSelector).
	Services   corelisters.ServiceLister
	Namespaces corelisters.NamespaceLister
	Nodes      *nodes.Resolver
	Caches     *arm.Caches
	// PoolEntries edits every IP-based pool written (the admin state of draining nodes).
	PoolEntries backends.PoolEntries
	// EndpointNodes names the nodes of a Local service's ready endpoints (several load
	// balancers only).
	EndpointNodes multislb.EndpointNodesFunc
	// PIPGroups records the resource groups public IPs were written in (optional: without it,
	// those of this process only). A dry run reads it and records nothing.
	PIPGroups pipgroups.Record
	// DryRun, when set, builds an implementation that writes nothing: Writers, PublicIPs and PrivateLinks
	// are read through the recorder, which records every write (the drift audit's detector and
	// the plan command).
	DryRun *dryrun.Recorder
}

// Build assembles the backends of the configured pool type, the placer when several load
// balancers are configured, and the LoadBalancer on top of them.
func Build(o BuildOptions) (*Parts, error) {
	if o.DryRun != nil {
		o.Writers, o.PublicIPs, o.PrivateLinks = dryrun.NewSet(o.Writers, o.DryRun), o.DryRun.PublicIPs(o.PublicIPs), o.DryRun.PrivateLinks(o.PrivateLinks)
		o.Kube = nil
		if o.PIPGroups != nil {
			o.PIPGroups = pipgroups.ReadOnly{R: o.PIPGroups}
		}
	}
	lo := Options{Config: o.Config, Writers: o.Writers, PublicIPs: o.PublicIPs, PrivateLinks: o.PrivateLinks, Kube: o.Kube,
		Zones: o.Zones, Recorder: o.Recorder, Services: o.Services, PIPGroups: o.PIPGroups, DryRun: o.DryRun != nil}
	parts := &Parts{Writers: o.Writers}
	if len(o.Config.MultipleStandardLoadBalancerConfigurations) > 0 {
		// Several load balancers need IP-based pools (the configuration is validated so).
		pools := backends.NewNodeIP(o.Config, o.Writers, o.PoolEntries)
		p, err := multislb.New(multislb.Options{Config: o.Config, Writers: o.Writers, Pools: pools, PrivateLinks: o.PrivateLinks, Recorder: o.Recorder,
			Namespaces: o.Namespaces, EndpointNodes: o.EndpointNodes, DryRun: o.DryRun != nil})
		if err != nil {
			return nil, fmt.Errorf("multipleStandardLoadBalancerConfigurations: %w", err)
		}
		lo.Backends, lo.Multi, parts.Placer = pools, p, p
	} else {
		b, err := backends.New(backends.Options{Config: o.Config, Writers: o.Writers, Nodes: o.Nodes, Caches: o.Caches, PoolEntries: o.PoolEntries})
		if err != nil {
			return nil, err
		}
		lo.Backends = b
	}
	lb, err := New(lo)
	if err != nil {
		return nil, err
	}
	parts.LoadBalancer = lb
	return parts, nil
}
