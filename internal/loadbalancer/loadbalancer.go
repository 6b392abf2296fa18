// Package loadbalancer implements cloudprovider.LoadBalancer for Standard load balancers: it
// wires the pure planners (plan), the group-commit writers (writer) and the ARM stores (azstore).
// Every change to one Azure resource goes through that resource's writer, so concurrent service
// reconciles share PUTs and never overwrite each other.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/azstore"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/writer"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// LoadBalancerClass is the spec.loadBalancerClass this provider serves besides "none".
const LoadBalancerClass = "service.k8s.io/azure"

// Event reasons.
const (
	ReasonInvalidAnnotation = "InvalidAnnotation"
)

// Options wire the load balancer implementation. Config and Network are required.
type Options struct {
	Config *config.Config
	// Network is the ARM network client factory of the network subscription.
	Network *armnetwork.ClientFactory
	// PollFrequency for long-running operations (default 5s).
	PollFrequency time.Duration
	// Zones of the region, for zone-redundant public IPs and internal frontends.
	Zones []string
	// Recorder receives Warning events on services (optional).
	Recorder record.EventRecorder
	// Services lists services, to keep NSG rules other services on a shared IP still need
	// (optional; without it a shared rule is repaired by the other service's next reconcile).
	Services corelisters.ServiceLister
	// Backends replaces the pool membership implementation. Default: addresses through the
	// backendAddressPools API for nodeIP pools; NIC and scale set VM ip configurations for
	// nodeIPConfiguration pools (which needs Nodes and Compute).
	Backends Backends
	// Nodes resolves nodes to their VMs and NIC ip configurations (nodeIPConfiguration pools).
	Nodes *nodes.Resolver
	// Compute is the compute client factory (scale set VMs and models).
	Compute *armcompute.ClientFactory
	// NodeNetwork is the network client factory of the node NICs (compute subscription);
	// default Network.
	NodeNetwork *armnetwork.ClientFactory
	// Caches are the resolver's list caches: dropped after NIC and scale set writes so later
	// lookups are not stale, and used to check scale set models without a GET (optional).
	Caches *arm.Caches
	// ListPublicIPs lists the public IPs of a resource group (a list cache); default: LIST.
	ListPublicIPs func(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error)
	// RefreshPublicIPs lists the public IPs of a resource group again unless the cached list is
	// a few seconds old (a user's public IP named by a service may be newer than the cached list);
	// default: ListPublicIPs.
	RefreshPublicIPs func(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error)
	// InvalidatePublicIPs is called after a failed public IP write (to drop a list cache).
	InvalidatePublicIPs func(rg string)
	// PublicIPWritten is called after a public IP write with the stored resource (nil: deleted),
	// to keep the list cache current without a LIST (see ReplacePublicIP). Without it, a write
	// invalidates the list instead.
	PublicIPWritten func(rg, name string, stored *armnetwork.PublicIPAddress)
	// CacheTTL of the writers' models (default loadBalancerCacheTTLInSeconds, else 120s).
	CacheTTL time.Duration
	// Namespaces reads namespace labels for serviceNamespaceSelector (multiple load balancers;
	// optional: without it no namespace selector matches).
	Namespaces corelisters.NamespaceLister
	// DisableWriteMerging makes every change its own read-modify-write (writer MaxBatch 1). It
	// exists only for the burst benchmark's baseline (test/bench), behind a hidden CCM flag.
	DisableWriteMerging bool
}

// LoadBalancer implements cloudprovider.LoadBalancer.
type LoadBalancer struct {
	cfg      *config.Config
	net      *armnetwork.ClientFactory
	opts     Options
	backends Backends

	lbs   *writer.Registry[armnetwork.LoadBalancer]
	nsgs  *writer.Registry[armnetwork.SecurityGroup]
	pips  *writer.Registry[armnetwork.PublicIPAddress]
	pools *writer.Registry[armnetwork.BackendAddressPool]

	// multi is set with multipleStandardLoadBalancerConfigurations (seed 004).
	multi *multiSLB
	// endpointNodes, installed by the Local pool updater, names the nodes hosting ready
	// endpoints of a service (ok=false until its informers have synced).
	endpointNodes atomicEndpointNodes
}

var _ cloudprovider.LoadBalancer = (*LoadBalancer)(nil)

// sharedWriteGather is the group-commit window of the writers that many services share (load
// balancers, the NSG, backend pools): the services of one load balancer batch reach the NSG
// within milliseconds of each other, and without a window the first one would be written alone.
// Small next to an ARM write (0.5–2 s).
const sharedWriteGather = 100 * time.Millisecond

// New builds the implementation.
func New(o Options) (*LoadBalancer, error) {
	if o.Config == nil || o.Network == nil {
		return nil, errors.New("loadbalancer: Config and Network are required")
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 120 * time.Second
		if s := o.Config.LoadBalancerCacheTTLInSeconds; s > 0 {
			o.CacheTTL = time.Duration(s) * time.Second
		}
		if o.Config.DisableAPICallCache {
			o.CacheTTL = 0
		}
	}
	l := &LoadBalancer{cfg: o.Config, net: o.Network, opts: o}
	wo := func() (poll time.Duration) { return o.PollFrequency }
	maxBatch, gather := 0, sharedWriteGather
	if o.DisableWriteMerging {
		maxBatch, gather = 1, 0
	}
	l.lbs = writer.NewRegistry(func(id string) writer.Store[armnetwork.LoadBalancer] {
		rg, name := idParts(id)
		return &azstore.LoadBalancer{Client: o.Network.NewLoadBalancersClient(), ResourceGroup: rg, Name: name, PollFrequency: wo()}
	}, writer.Options[armnetwork.LoadBalancer]{CacheTTL: o.CacheTTL, MaxBatch: maxBatch, Gather: gather})
	l.nsgs = writer.NewRegistry(func(id string) writer.Store[armnetwork.SecurityGroup] {
		rg, name := idParts(id)
		return &azstore.SecurityGroup{Client: o.Network.NewSecurityGroupsClient(), ResourceGroup: rg, Name: name, PollFrequency: wo()}
	}, writer.Options[armnetwork.SecurityGroup]{CacheTTL: o.CacheTTL, MaxBatch: maxBatch, Gather: gather})
	l.pips = writer.NewRegistry(func(id string) writer.Store[armnetwork.PublicIPAddress] {
		rg, name := idParts(id)
		return &azstore.PublicIP{Client: o.Network.NewPublicIPAddressesClient(), ResourceGroup: rg, Name: name, PollFrequency: wo()}
	}, writer.Options[armnetwork.PublicIPAddress]{CacheTTL: o.CacheTTL, MaxBatch: maxBatch})
	l.pools = writer.NewRegistry(func(id string) writer.Store[armnetwork.BackendAddressPool] {
		// …/loadBalancers/<lb>/backendAddressPools/<pool>
		lbID := id[:strings.LastIndex(strings.ToLower(id), "/backendaddresspools/")]
		rg, lbName := idParts(lbID)
		return &azstore.BackendPool{Client: o.Network.NewLoadBalancerBackendAddressPoolsClient(), ResourceGroup: rg,
			LoadBalancer: lbName, Name: lastSegment(id), PollFrequency: wo()}
	}, writer.Options[armnetwork.BackendAddressPool]{CacheTTL: o.CacheTTL, MaxBatch: maxBatch, Gather: gather})

	if len(o.Config.MultipleStandardLoadBalancerConfigurations) > 0 {
		cfgs, err := placement.Compile(o.Config.MultipleStandardLoadBalancerConfigurations)
		if err != nil {
			return nil, err
		}
		l.multi = &multiSLB{cfgs: cfgs, nodeLB: map[string]string{}, pending: map[string]int{}}
		RegisterMetrics()
	}
	l.backends = o.Backends
	if l.backends == nil && strings.EqualFold(o.Config.LoadBalancerBackendPoolConfigurationType, config.BackendPoolNodeIPConfiguration) {
		if o.Nodes == nil || o.Compute == nil {
			return nil, errors.New("loadbalancer: nodeIPConfiguration backend pools need Nodes and Compute")
		}
		l.backends = newIPConfigBackends(o, l)
	}
	if l.backends == nil && strings.EqualFold(o.Config.LoadBalancerBackendPoolConfigurationType, config.BackendPoolNodeIP) {
		l.backends = &nodeIPBackends{
			vnetID: fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
				o.Config.NetworkSubscriptionID(), o.Config.VnetRG(), o.Config.VnetName),
			// nodeIP pools always leave control-plane nodes out, as the existing provider does.
			filter: NodeFilter{ExcludeControlPlane: true, ResourceGroup: o.Config.ResourceGroup},
			pools:  l.pools,
			// A pool write changes the LB's ETag: drop the LB writer's cache.
			onWrite: func(lbID string) { l.lbs.For(lbID).Invalidate() },
			hook:    l.ApplyPoolEntriesHook,
		}
	}
	return l, nil
}

// GetLoadBalancerName is the existing provider's name: "a" + UID without dashes, 32 characters.
func (l *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return naming.ServiceLBName(svc.UID)
}

// ours reports whether the service's loadBalancerClass is served here.
func ours(svc *v1.Service) bool {
	return svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == LoadBalancerClass
}

func (l *LoadBalancer) cluster(clusterName string) *plan.Cluster {
	c := &plan.Cluster{
		SubscriptionID:      l.cfg.NetworkSubscriptionID(),
		ResourceGroup:       l.cfg.LoadBalancerRG(),
		Location:            l.cfg.Location,
		ClusterName:         clusterName,
		LBNamePrefix:        l.cfg.LoadBalancerName,
		Zones:               l.opts.Zones,
		DisableOutboundSNAT: l.cfg.OutboundSNATDisabled(),
		SharedProbe:         strings.EqualFold(l.cfg.ClusterServiceLoadBalancerHealthProbeMode, config.HealthProbeModeShared),
		SharedProbePort:     l.cfg.ClusterServiceSharedLoadBalancerHealthProbePort,
		SharedProbePath:     l.cfg.ClusterServiceSharedLoadBalancerHealthProbePath,
		Tags:                configTags(l.cfg),
	}
	return c
}

// configTags merges azure.json tags ("k=v,k2=v2") and tagsMap.
func configTags(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(cfg.Tags, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			out[k] = strings.TrimSpace(v)
		}
	}
	for k, v := range cfg.TagsMap {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// parse validates the annotations; a mistake becomes a Warning event and no ARM write.
func (l *LoadBalancer) parse(svc *v1.Service) (*plan.Service, error) {
	o, err := annotations.Parse(svc)
	if err != nil {
		if l.opts.Recorder != nil {
			l.opts.Recorder.Event(svc, v1.EventTypeWarning, ReasonInvalidAnnotation, err.Error())
		}
		return nil, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return &plan.Service{Svc: svc, Opts: o}, nil
}

// lenient is used on deletion: a service whose annotations are now invalid must still be
// cleaned up, with whatever can be read.
func lenient(svc *v1.Service) *plan.Service {
	if o, err := annotations.Parse(svc); err == nil {
		return &plan.Service{Svc: svc, Opts: o}
	}
	o := &annotations.ServiceOptions{Ports: map[int32]annotations.PortOptions{}, IdleTimeoutMinutes: annotations.DefaultIdleTimeoutMinutes}
	o.Internal = strings.EqualFold(strings.TrimSpace(svc.Annotations[annotations.Internal]), "true")
	o.PIPNameIPv4 = strings.TrimSpace(svc.Annotations[annotations.PIPName])
	o.PIPNameIPv6 = strings.TrimSpace(svc.Annotations[annotations.PIPNameIPv6])
	o.PIPResourceGroup = strings.TrimSpace(svc.Annotations[annotations.ResourceGroup])
	o.DisableFloatingIP = strings.EqualFold(strings.TrimSpace(svc.Annotations[annotations.DisableFloatingIP]), "true")
	return &plan.Service{Svc: svc, Opts: o}
}

func (l *LoadBalancer) lbWriter(c *plan.Cluster, lbName string) *writer.Writer[armnetwork.LoadBalancer] {
	return l.lbs.For(c.LBID(lbName))
}

func (l *LoadBalancer) nsgWriter() *writer.Writer[armnetwork.SecurityGroup] {
	return l.nsgs.For(fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/networkSecurityGroups/%s",
		l.cfg.NetworkSubscriptionID(), l.cfg.SecurityGroupRG(), l.cfg.SecurityGroupName))
}

func (l *LoadBalancer) pipWriter(rg, name string) *writer.Writer[armnetwork.PublicIPAddress] {
	return l.pips.For(fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/publicIPAddresses/%s",
		l.cfg.NetworkSubscriptionID(), rg, name))
}

func (l *LoadBalancer) pipRG(s *plan.Service) string {
	if s.Opts.PIPResourceGroup != "" {
		return s.Opts.PIPResourceGroup
	}
	return l.cfg.ResourceGroup
}

func (l *LoadBalancer) listPIPs(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	if l.opts.ListPublicIPs != nil {
		return l.opts.ListPublicIPs(ctx, rg)
	}
	var out []*armnetwork.PublicIPAddress
	pager := l.net.NewPublicIPAddressesClient().NewListPager(rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if azstore.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing public IPs of %s: %w", rg, err)
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

// pipWritten keeps the public IP list cache in step with a write of public IP name.
// refreshPIPs lists the public IPs of rg again (see Options.RefreshPublicIPs).
func (l *LoadBalancer) refreshPIPs(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	if l.opts.RefreshPublicIPs != nil {
		return l.opts.RefreshPublicIPs(ctx, rg)
	}
	return l.listPIPs(ctx, rg)
}

func (l *LoadBalancer) pipWritten(rg, name string, stored *armnetwork.PublicIPAddress, err error) {
	if err == nil && l.opts.PublicIPWritten != nil {
		l.opts.PublicIPWritten(rg, name, stored)
		return
	}
	if l.opts.InvalidatePublicIPs != nil {
		l.opts.InvalidatePublicIPs(rg)
	}
}

// ReplacePublicIP returns items with the public IP called name replaced by stored, appended when
// it is new, or removed when stored is nil. It does not modify items.
func ReplacePublicIP(items []*armnetwork.PublicIPAddress, name string, stored *armnetwork.PublicIPAddress) []*armnetwork.PublicIPAddress {
	out := make([]*armnetwork.PublicIPAddress, 0, len(items)+1)
	for _, p := range items {
		if p != nil && strings.EqualFold(str(p.Name), name) {
			continue
		}
		out = append(out, p)
	}
	if stored != nil {
		out = append(out, stored)
	}
	return out
}

func (l *LoadBalancer) subnetID(s *plan.Service) string {
	subnet := s.Opts.InternalSubnet
	if subnet == "" {
		subnet = l.cfg.SubnetName
	}
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
		l.cfg.NetworkSubscriptionID(), l.cfg.VnetRG(), l.cfg.VnetName, subnet)
}

// idParts extracts the resource group and the name of a resource ID.
func idParts(id string) (rg, name string) {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "resourceGroups") {
			rg = parts[i+1]
		}
	}
	return rg, parts[len(parts)-1]
}

func lastSegment(id string) string { return id[strings.LastIndex(id, "/")+1:] }

func addrOf(s *string) (netip.Addr, bool) {
	if s == nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(*s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// retainPorts are the ports other services serve on the given destinations (shared IPs; node
// IPs for services without floating IP), so cleaning this service keeps their NSG rules intact.
func (l *LoadBalancer) retainPorts(s *plan.Service, dsts []netip.Addr) map[armnetwork.SecurityRuleProtocol][]int32 {
	if l.opts.Services == nil {
		return nil
	}
	svcs, err := l.opts.Services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing services for NSG rule retention")
		return nil
	}
	set := map[netip.Addr]bool{}
	for _, a := range dsts {
		set[a] = true
	}
	out := map[armnetwork.SecurityRuleProtocol][]int32{}
	for _, other := range svcs {
		if other.UID == s.Svc.UID || other.Spec.Type != v1.ServiceTypeLoadBalancer || other.DeletionTimestamp != nil || !ours(other) {
			continue
		}
		// Decided before parsing the other service's annotations: a reconcile looks at every
		// service, and parsing them all made a burst of N services cost N² parses.
		shares := s.Opts.DisableFloatingIP && strings.EqualFold(strings.TrimSpace(other.Annotations[annotations.DisableFloatingIP]), "true")
		for _, ing := range other.Status.LoadBalancer.Ingress {
			if a, ok := addrOf(&ing.IP); ok && set[a] {
				shares = true
			}
		}
		if !shares {
			continue
		}
		ports, err := plan.DestinationPorts(lenient(other))
		if err != nil {
			continue
		}
		for proto, ps := range ports {
			out[proto] = append(out[proto], ps...)
		}
	}
	return out
}
