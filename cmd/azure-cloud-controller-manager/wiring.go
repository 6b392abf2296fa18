package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/cloudconfig"
	"github.com/azure-ccm/azure-ccm/internal/cloudconfig/sources"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate"
	"github.com/azure-ccm/azure-ccm/internal/controllers/driftaudit"
	"github.com/azure-ccm/azure-ccm/internal/controllers/localpools"
	"github.com/azure-ccm/azure-ccm/internal/controllers/loginhealth"
	"github.com/azure-ccm/azure-ccm/internal/controllers/nodeipam"
	"github.com/azure-ccm/azure-ccm/internal/controllers/nodeipam/ipam"
	"github.com/azure-ccm/azure-ccm/internal/controllers/outofservice"
	"github.com/azure-ccm/azure-ccm/internal/controllers/pvzones"
	sgcontroller "github.com/azure-ccm/azure-ccm/internal/controllers/servicegateway"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/pipgroups"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
	"github.com/azure-ccm/azure-ccm/internal/nodefilter"
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/internal/reload"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway"
)

// wiring holds what the CCM builds, in the order the cloud-provider app asks for it: the flags,
// then the provider (initCloud; it builds its writers when it starts), then, once a controller
// first needs it, the load balancer implementation (buildLoadBalancer), then the controllers
// (controllers). A cloud config reload (reloadCloud) builds all but the flags again.
type wiring struct {
	// disableWriteMerging is the hidden --disable-lb-write-merging flag: every load balancer,
	// NSG and public IP change becomes its own read-modify-write. It exists only so that the
	// burst benchmark can measure the no-merging variants; nobody should run a cluster with it.
	disableWriteMerging bool
	// auditPeriod and auditWorkers are --drift-audit-period and --drift-audit-workers.
	auditPeriod  time.Duration
	auditWorkers int
	// loginStepDown is --login-step-down-after.
	loginStepDown time.Duration
	// ipam holds the node-ipam flags the CCM adds (the rest are the app's).
	ipam ipam.Flags
	// source is where azure.json comes from (--cloud-config, --cloud-config-secret-*), and
	// dynamicReloading --enable-dynamic-reloading.
	source           cloudconfig.Source
	dynamicReloading bool
	// nodeFilter is --node-filter-requirements; nodeSelector its parsed form (nil: every node).
	nodeFilter   string
	nodeSelector labels.Selector

	cfg *cloudcontrollerconfig.CompletedConfig
	// served is what the cloud-provider app and its controllers get: it delegates to cloud
	// and restarts the controllers when a reload replaces cloud.
	served *reload.Cloud
	mu     sync.Mutex
	cloud  *provider.Cloud
	// parts is the node-based load balancer implementation (nil in service-gateway mode, or
	// when it could not be built); buildOpts what it was built from.
	parts     *loadbalancer.Parts
	buildOpts loadbalancer.BuildOptions
}

// A reload retires the provider it replaces (its Azure writes end before the next one's begin)
// only if the provider is a reload.Retirer.
var _ reload.Retirer = (*provider.Cloud)(nil)

// initCloud prepares the provider from the cloud config's sources (file, Secret or both, as
// cloudConfigType says) without any ARM call: a mistake is fatal with the offending key named.
// Login and the first ARM calls happen in the provider's Initialize, after the secure port
// serves, and are retried with backoff there. With --enable-dynamic-reloading a watcher applies
// every valid change of the sources through reloadCloud.
func (w *wiring) initCloud(c *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
	w.cfg = c
	cc := c.ComponentConfig.KubeCloudShared.CloudProvider
	if cc.Name != provider.ProviderName {
		klog.Fatalf("Cloud provider %q is unknown (this binary serves %q)", cc.Name, provider.ProviderName)
	}
	sel, err := nodefilter.Parse(w.nodeFilter)
	if err != nil {
		klog.Fatalf("%v", err)
	}
	// Before anything asks for the Node informer: every controller, the provider's node map
	// and the load balancer then see only the matching nodes.
	if err := nodefilter.Install(c.SharedInformers, sel); err != nil {
		klog.Fatalf("--%s: %v", nodefilter.Flag, err)
	}
	w.nodeSelector = sel
	if sel != nil {
		klog.InfoS("Node filter: the controllers see only the nodes matching the selector", "selector", sel.String())
	}
	src := w.source
	src.File, src.Kube = cc.CloudConfigFile, c.Client
	ctx := context.Background()
	loaded, err := src.Load(ctx)
	if err != nil {
		klog.Fatalf("Cloud provider %q could not be initialized: %v", cc.Name, err)
	}
	typ := loaded.Type
	if src.File != "" && !loaded.TypeSet {
		typ += " (not set)"
	}
	klog.InfoS("Cloud config read", "origin", loaded.Origin, "cloudConfigType", typ, "secret", loaded.SecretNote)
	cloud, err := w.newCloud(loaded, false)
	if err != nil {
		klog.Fatalf("Cloud provider %q could not be initialized: %v", cc.Name, err)
	}
	w.setCloud(cloud)
	if err := w.served.Replace(cloud); err != nil {
		klog.Fatalf("Cloud provider %q could not be initialized: %v", cc.Name, err)
	}
	if w.dynamicReloading {
		cloudconfig.RegisterMetrics()
		watcher := &cloudconfig.Watcher{Source: src, Apply: w.reloadCloud, Recorder: c.EventRecorder,
			WatchSecret: src.File == "" || loaded.Type != sources.TypeFile}
		go watcher.Run(ctx, loaded.Data)
	}
	return w.served
}

// reloadStartTimeout bounds the start of the provider of a new configuration (login, zones): a
// configuration that cannot log in is refused, not retried forever.
const reloadStartTimeout = 2 * time.Minute

// newCloud prepares a provider on a loaded configuration (no ARM call). A reload's provider
// gets the shared informers the first one already trimmed and started.
func (w *wiring) newCloud(l cloudconfig.Loaded, reload bool) (*provider.Cloud, error) {
	o := provider.Options{
		DisableWriteMerging: w.disableWriteMerging,
		LoadBalancer:        w.buildLoadBalancer,
		InformersTrimmed:    reload,
		LoginStepDownAfter:  w.loginStepDown,
	}
	if l.Secret != nil {
		o.ConfigObject = l.Secret
	}
	return provider.PrepareFromBytes(l.Data, o)
}

// reloadCloud starts a provider on a new configuration and, once it is up, makes it the one
// served: the controllers restart on it under the same leadership. An error before the swap
// leaves the running provider and controllers as they are.
func (w *wiring) reloadCloud(ctx context.Context, l cloudconfig.Loaded) error {
	// Checked here too, not only when the load balancer is built: a controller must not be
	// stopped for a configuration that its load balancer would refuse.
	if err := config.ValidateMultiSLBClusterName(l.Config, w.cfg.ComponentConfig.KubeCloudShared.ClusterName); err != nil {
		return err
	}
	next, err := w.newCloud(l, true)
	if err != nil {
		return err
	}
	// Started here, bounded, not in Initialize as at start-up: a configuration that cannot log
	// in must be refused while the running provider and controllers still serve.
	sctx, cancel := context.WithTimeout(ctx, reloadStartTimeout)
	defer cancel()
	if err := next.Start(sctx); err != nil {
		return fmt.Errorf("starting the cloud provider: %w", err)
	}
	w.setCloud(next)
	if err := w.served.Replace(next); err != nil {
		// The controllers already stopped and some did not start again: neither the old nor
		// the new configuration is fully served. Exit, as the app does when a controller fails
		// to start, so that the kubelet restarts the CCM on the new configuration.
		klog.Fatalf("Cloud config reload: the new provider is in place but controllers failed to start on it: %v", err)
	}
	return nil
}

func (w *wiring) setCloud(c *provider.Cloud) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cloud = c
}

// provider is the provider in use.
func (w *wiring) provider() *provider.Cloud {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cloud
}

// enabled reports whether a controller is on in --controllers.
func (w *wiring) enabled(name string) bool {
	return genericcontrollermanager.IsControllerEnabled(name, app.ControllersDisabledByDefault, w.cfg.ComponentConfig.Generic.Controllers)
}

// buildLoadBalancer builds the load balancer implementation on the provider's writers. It runs
// once, after leader election and before any controller gets the implementation, so the Basic
// to Standard migration (migration.go) and then the NIC-based to IP-based pool migration
// (poolmigration.go) run before any service reconcile.
func (w *wiring) buildLoadBalancer(d provider.LoadBalancerDeps) (cloudprovider.LoadBalancer, error) {
	if servicegateway.Enabled(d.Config) { // the service-gateway controller serves every Service
		return servicegateway.ElsewhereLoadBalancer{}, nil
	}
	o := loadbalancer.BuildOptions{Config: d.Config, Writers: d.Writers, PublicIPs: d.Clients.Caches.NetworkPublicIPs,
		PrivateLinks: d.Clients.Caches.PrivateLinkServices, Kube: d.Kube, Zones: d.Zones, Recorder: d.Recorder, Nodes: d.Nodes,
		Caches: d.Clients.Caches}
	if d.Kube != nil {
		// Next to the leader election lease: the namespace the CCM is deployed in.
		ns := w.cfg.ComponentConfig.Generic.LeaderElection.ResourceNamespace
		if ns == "" {
			ns = metav1.NamespaceSystem
		}
		o.PIPGroups = pipgroups.NewConfigMap(d.Kube, ns)
	}
	if f := d.Informers; f != nil {
		o.Services = f.Core().V1().Services().Lister()
		// Namespace labels only matter to serviceNamespaceSelector: no namespace informer
		// (nor its RBAC) without one.
		for _, m := range d.Config.MultipleStandardLoadBalancerConfigurations {
			if m.ServiceNamespaceSelector != nil {
				o.Namespaces = f.Core().V1().Namespaces().Lister()
				break
			}
		}
		if d.Config.AdminStateEnabled() && w.enabled(adminstate.Name) {
			o.PoolEntries = adminstate.PoolEntries(f.Core().V1().Nodes().Lister())
		}
		if len(d.Config.MultipleStandardLoadBalancerConfigurations) > 0 && w.enabled(localpools.Name) {
			slices, svcs, nodes := f.Discovery().V1().EndpointSlices(), f.Core().V1().Services(), f.Core().V1().Nodes()
			o.EndpointNodes = localpools.EndpointNodes(slices.Lister(), slices.Informer().HasSynced, svcs.Informer().HasSynced, nodes.Informer().HasSynced)
		}
	}
	parts, err := loadbalancer.Build(o)
	if err != nil {
		return nil, err
	}
	w.parts, w.buildOpts = parts, o
	migrateBeforeServing(d, parts.LoadBalancer, w.cfg.ComponentConfig.KubeCloudShared.ClusterName, w.nodeSelector)
	migratePoolsBeforeServing(d, o, w.cfg.ComponentConfig.KubeCloudShared.ClusterName, w.nodeSelector)
	return parts.LoadBalancer, nil
}

// nodeLoadBalancer builds the load balancer implementation if no controller did yet, and
// returns its parts (nil when there is no node-based one).
func (w *wiring) nodeLoadBalancer() *loadbalancer.Parts {
	if _, ok := w.provider().LoadBalancer(); !ok {
		return nil
	}
	return w.parts
}

// auditor is the drift audit's view of the node-based load balancer implementation (nil when
// there is none).
func (w *wiring) auditor() (driftaudit.Auditor, error) {
	p := w.nodeLoadBalancer()
	if p == nil {
		return nil, nil
	}
	// Checks and repairs run in turn, each on a twin: as many twins as the larger of the two.
	a, err := loadbalancer.NewAuditor(w.buildOpts, p.LoadBalancer, max(w.auditWorkers, driftaudit.DefaultRepairs))
	if err != nil {
		return nil, err
	}
	return a, nil
}

// controllers are the CCM's own controllers, each started with exactly what it uses.
func (w *wiring) controllers() []controllers.Controller {
	return []controllers.Controller{
		{Name: adminstate.Name, ClientName: "admin-state-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			cloud := w.provider()
			cfg := cloud.Config
			return adminstate.Start(ctx, cc, adminstate.Deps{Enabled: cfg.AdminStateEnabled(), NodePools: w.nodeLoadBalancer() != nil,
				LoadBalancers: cloud.Writers.LoadBalancers, LoadBalancerIDs: plan.LoadBalancerIDs(cfg, cc.ClusterName())})
		}},
		{Name: localpools.Name, ClientName: "local-pools-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			d := localpools.Deps{Interval: time.Duration(w.provider().Config.LoadBalancerBackendPoolUpdateIntervalInSeconds) * time.Second}
			if p := w.nodeLoadBalancer(); p != nil {
				d.Placer = p.Placer
			}
			return localpools.Start(ctx, cc, d)
		}},
		{Name: driftaudit.Name, ClientName: "drift-audit-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			return driftaudit.Start(ctx, cc, driftaudit.Deps{Period: w.auditPeriod, Workers: w.auditWorkers,
				Repairs: driftaudit.DefaultRepairs, Auditor: w.auditor})
		}},
		{Name: nodeipam.Name, ClientName: "node-ipam-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			shared := cc.Config.ComponentConfig.KubeCloudShared
			f := w.ipam
			f.ClusterCIDR, f.AllocatorType = shared.ClusterCIDR, shared.CIDRAllocatorType
			return nodeipam.Start(ctx, cc, nodeipam.Deps{Allocate: shared.AllocateNodeCIDRs, Flags: f})
		}},
		{Name: loginhealth.Name, ClientName: "login-health-controller", Start: func(ctx context.Context, _ controllers.Context) (controller.Interface, bool, error) {
			c, err := loginhealth.New(loginhealth.Options{
				Misconfigured: func() (time.Time, error) { return w.provider().LoginMisconfigured() },
				StepDownAfter: w.loginStepDown,
				Exit: func(err error) {
					klog.ErrorS(err, "Stepping down")
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				},
			})
			if err != nil {
				return nil, false, err
			}
			go c.Run(ctx)
			return c, true, nil
		}},
		{Name: outofservice.Name, ClientName: "node-out-of-service-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			return outofservice.Start(ctx, cc)
		}},
		{Name: pvzones.Name, ClientName: "pv-zone-labels-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			cloud := w.provider()
			return pvzones.Start(ctx, cc, pvzones.Deps{Disks: disks.NewClient(cloud.Clients), Location: cloud.Config.Location})
		}},
		{Name: sgcontroller.Name, ClientName: "service-gateway-controller", Start: func(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
			cloud := w.provider()
			return sgcontroller.Start(ctx, cc, sgcontroller.Deps{Config: cloud.Config, Network: cloud.Clients.Network,
				PollFrequency: cloud.Clients.PollFrequency})
		}},
	}
}
