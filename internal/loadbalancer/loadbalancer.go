// Package loadbalancer is the service entry points of the cloud provider
// (cloudprovider.LoadBalancer) for Standard load balancers: for a Service it reads Azure through
// the writers' caches, asks the pure planners (package plan) for the desired load balancer,
// public IPs and NSG rules, and submits them to the resources' group-commit writers. Node
// backend pools are package backends', placement on several load balancers package multislb's.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/pipgroups"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/writer"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// Event reasons.
const (
	ReasonInvalidAnnotation = "InvalidAnnotation"
)

// Options are what the implementation is built from. Config, Writers, PublicIPs and
// PrivateLinks are required.
type Options struct {
	Config  *config.Config
	Writers *writers.Set
	// PublicIPs is the public IP list cache (one LIST per resource group), kept current by the
	// writes made here.
	PublicIPs dryrun.PublicIPLists
	// PrivateLinks is the private link service list cache (one LIST per resource group), kept
	// current by the writes made here.
	PrivateLinks dryrun.PrivateLinkLists
	// Kube records the private link service alias on services (optional).
	Kube kubernetes.Interface
	// Zones of the region, for zone-redundant public IPs and internal frontends.
	Zones []string
	// Recorder receives Warning events on services (optional).
	Recorder record.EventRecorder
	// Services lists services, to keep NSG rules other services on a shared IP still need
	// (optional; without it a shared rule is repaired by the other service's next reconcile).
	Services corelisters.ServiceLister
	// Backends keeps the cluster pools in step with the nodes (nil: nobody fills them).
	Backends backends.Backends
	// Multi places services and nodes on several load balancers; nil with one load balancer.
	Multi *multislb.Placer
	// PIPGroups records the resource groups public IPs were written in, so they are found
	// there once no service names the group (nil: a record of this process only).
	PIPGroups pipgroups.Record
	// DryRun says that Writers record instead of writing (package dryrun): the implementation
	// then counts nothing in the metrics of real writes.
	DryRun bool
}

// LoadBalancer implements cloudprovider.LoadBalancer.
type LoadBalancer struct {
	cfg   *config.Config
	opts  Options
	lbs   *writer.Registry[armnetwork.LoadBalancer]
	nsgs  *writer.Registry[armnetwork.SecurityGroup]
	pips  *writer.Registry[armnetwork.PublicIPAddress]
	multi *multislb.Placer
	// locks serialises the writes made for one service (by UID): a reconcile, the drift
	// audit's repair and the deletion never interleave.
	locks *serviceLocks
	// rules are the rules reserved by services admitted on the single load balancer (one per
	// kind) whose write is under way.
	rules *ruleReservations
}

var _ cloudprovider.LoadBalancer = (*LoadBalancer)(nil)

// New builds the implementation.
func New(o Options) (*LoadBalancer, error) {
	if o.Config == nil || o.Writers == nil || o.PublicIPs == nil || o.PrivateLinks == nil {
		return nil, errors.New("loadbalancer: Config, Writers, PublicIPs and PrivateLinks are required")
	}
	registerMetrics()
	if o.PIPGroups == nil {
		o.PIPGroups = &pipgroups.Memory{}
	}
	return &LoadBalancer{cfg: o.Config, opts: o, lbs: o.Writers.LoadBalancers, nsgs: o.Writers.SecurityGroups,
		pips: o.Writers.PublicIPs, multi: o.Multi, locks: newServiceLocks(), rules: newRuleReservations()}, nil
}

// GetLoadBalancerName is the existing provider's name: "a" + UID without dashes, 32 characters.
func (l *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return naming.ServiceLBName(svc.UID)
}

func (l *LoadBalancer) cluster(clusterName string) *plan.Cluster {
	return plan.NewCluster(l.cfg, clusterName, l.opts.Zones)
}

// clusters are the cluster settings of every load balancer pair the cluster may use: one per
// configuration, or the single default pair.
func (l *LoadBalancer) clusters(clusterName string) []*plan.Cluster {
	base := l.cluster(clusterName)
	if l.multi == nil {
		return []*plan.Cluster{base}
	}
	return l.multi.Clusters(base)
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
	if l.opts.Recorder != nil {
		for _, w := range o.Warnings {
			l.opts.Recorder.Event(svc, v1.EventTypeWarning, w.Reason, w.String())
		}
	}
	return &plan.Service{Svc: svc, Opts: o}, nil
}

// warn records a Warning event on the service (when a recorder is configured).
func (l *LoadBalancer) warn(svc *v1.Service, reason, msg string) {
	l.event(svc, v1.EventTypeWarning, reason, msg)
}

func (l *LoadBalancer) lbWriter(c *plan.Cluster, lbName string) *writer.Writer[armnetwork.LoadBalancer] {
	return l.lbs.For(c.LBID(lbName))
}

func (l *LoadBalancer) nsgWriter() *writer.Writer[armnetwork.SecurityGroup] {
	return l.nsgs.For(azureid.SecurityGroup(l.cfg.NetworkSubscriptionID(), l.cfg.SecurityGroupRG(), l.cfg.SecurityGroupName))
}

func (l *LoadBalancer) pipWriter(rg, name string) *writer.Writer[armnetwork.PublicIPAddress] {
	return l.pips.For(azureid.PublicIP(l.cfg.NetworkSubscriptionID(), rg, name))
}

// syncBackends brings the cluster pools in step with the nodes: of lb alone with one load
// balancer; with several, the nodes are placed and every existing configured load balancer gets
// the nodes placed on it.
func (l *LoadBalancer) syncBackends(ctx context.Context, c *plan.Cluster, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error {
	switch {
	case l.opts.Backends == nil:
		return nil
	case l.multi != nil:
		return l.multi.SyncNodes(ctx, c, nodes)
	}
	return l.opts.Backends.Sync(ctx, c.ClusterName, lb, nodes)
}
