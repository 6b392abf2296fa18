// Package provider implements cloudprovider.Interface for Azure on top of the configuration
// (internal/config), the ARM access layer (internal/arm), node resolution (internal/nodes) and
// the Azure writers (internal/writers), which Start builds: one set per provider. The load
// balancer implementation is given as a builder (Options.LoadBalancer).
package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/armjson"
	"github.com/azure-ccm/azure-ccm/internal/azstore"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/trim"
	"github.com/azure-ccm/azure-ccm/internal/writers"
)

// ProviderName is the name to pass as --cloud-provider.
const ProviderName = "azure"

// LoadBalancerDeps is what a load balancer implementation gets from the provider. It is built
// after the cloud-provider app has called Initialize and SetInformers.
type LoadBalancerDeps struct {
	Config  *config.Config
	Clients *arm.Clients
	// Writers are the provider's Azure writers (one per resource).
	Writers  *writers.Set
	Nodes    *nodes.Resolver
	Zones    []string
	Kube     kubernetes.Interface
	Recorder record.EventRecorder
	// Informers is the CCM's shared informer factory (nil before SetInformers).
	Informers informers.SharedInformerFactory
	// Context is the provider generation's lifetime: work started for this provider (the
	// start-up migrations) ends with it.
	Context context.Context
}

// LoadBalancerBuilder builds the cloudprovider.LoadBalancer implementation.
type LoadBalancerBuilder func(LoadBalancerDeps) (cloudprovider.LoadBalancer, error)

// Options customise New.
type Options struct {
	// ARM options (transport, credential, environment ...).
	ARM arm.Options
	// StartupBackoff is the first delay between start-up attempts (default 2s, doubling to 30s).
	StartupBackoff time.Duration
	// RouteGatherWindow overrides the route writer's batching window.
	RouteGatherWindow time.Duration
	// DisableWriteMerging makes every load balancer, NSG and public IP change its own
	// read-modify-write (the burst benchmark's no-merging variants only).
	DisableWriteMerging bool
	// LoadBalancer builds the cloudprovider.LoadBalancer implementation, once, when the
	// service controller (or another controller) first asks for it (nil: none, and the
	// service controller does not run).
	LoadBalancer LoadBalancerBuilder
	// Fatal is called by Initialize when start-up meets a configuration mistake (default: log it
	// and exit with status 1).
	Fatal func(error)
	// LoginStepDownAfter is how long logins may fail with a configuration error (an untrusted
	// login server, credentials refused) before start-up gives up as on any configuration
	// mistake, so that the process exits and a standby replica takes the lease; 0 retries for
	// ever. LoginMisconfigured reports such failures at any time.
	LoginStepDownAfter time.Duration
	// InformersTrimmed says the shared informers SetInformers gets already drop what the CCM
	// never reads: a provider replacing another on a cloud config reload gets the running
	// informers the first one trimmed (a running informer refuses a transform).
	InformersTrimmed bool
	// ConfigObject is the object the configuration came from (the cloud config Secret), if any:
	// Initialize records the start-up warnings about the configuration on it as events.
	ConfigObject runtime.Object
}

// ReasonLoginMethodsIgnored is the Warning event recorded on Options.ConfigObject when several
// login methods are configured.
const ReasonLoginMethodsIgnored = "LoginMethodsIgnored"

// Cloud is the Azure cloud provider.
type Cloud struct {
	Config   *config.Config
	Clients  *arm.Clients
	Resolver *nodes.Resolver
	// Writers are the provider's Azure writers: built by Start and given to every part that
	// writes Azure through this provider.
	Writers *writers.Set

	opts    Options
	started atomic.Bool

	zonesMu sync.RWMutex
	zones   map[string][]string

	lbBuilder LoadBalancerBuilder
	// onPremRoutes remembers routes of on-prem nodes (name -> CIDR): nothing exists in Azure
	// for them, but the route controller must see them as done.
	onPremMu     sync.Mutex
	onPremRoutes map[string]cloudprovider.Route
	// graceReported holds the UIDs of nodes already given the not-found grace event.
	graceReported sync.Map

	kube      kubernetes.Interface
	recorder  record.EventRecorder
	informers informers.SharedInformerFactory

	// life is this provider generation's lifetime: it ends when Initialize's stop channel closes
	// (a reload replaced the provider, or the process stops). Background until Initialize.
	life   context.Context
	lbOnce sync.Once
	lb     cloudprovider.LoadBalancer
	lbErr  error
}

var _ cloudprovider.Interface = (*Cloud)(nil)
var _ cloudprovider.InformerUser = (*Cloud)(nil)

var envLookup = os.Getenv

// PrepareFromBytes parses azure.json and prepares the provider (see Prepare).
func PrepareFromBytes(data []byte, o Options) (*Cloud, error) {
	cfg, err := config.Parse(data, envLookup)
	if err != nil {
		// A configuration mistake does not heal by retrying: fail with the key named.
		return nil, fmt.Errorf("invalid cloud config: %w", err)
	}
	if unknown, _ := config.UnknownKeys(bytes.TrimSpace(data)); len(unknown) > 0 {
		klog.ErrorS(nil, "Unknown keys in the cloud config are ignored", "keys", unknown)
	}
	return Prepare(cfg, o)
}

// NewFromBytes parses azure.json and starts the provider (see New).
func NewFromBytes(ctx context.Context, data []byte, o Options) (*Cloud, error) {
	c, err := PrepareFromBytes(data, o)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Prepare checks what a retry cannot heal — the credentials configured, the certificate and
// federated token files readable — without any network call, and returns the provider, not yet
// started.
func Prepare(cfg *config.Config, o Options) (*Cloud, error) {
	if o.ARM.Credential == nil {
		if err := arm.CheckCredentials(cfg); err != nil {
			return nil, fmt.Errorf("invalid cloud config: %w", err)
		}
		if w := cfg.LoginWarning(); w != "" {
			// Starting, as the existing provider does, but not silently: the identity in use
			// may not be the one the operator thinks.
			klog.Warningf("Cloud config: %s", w)
		}
	}
	if o.ARM.LoginHealth == nil {
		o.ARM.LoginHealth = arm.NewLoginHealth(nil)
	}
	return &Cloud{Config: cfg, opts: o, onPremRoutes: map[string]cloudprovider.Route{}, lbBuilder: o.LoadBalancer}, nil
}

// LoginMisconfigured returns the configuration error the provider's logins have failed with
// since the returned time, with no success or transient failure in between (nil: none).
func (c *Cloud) LoginMisconfigured() (since time.Time, err error) {
	since, le := c.opts.ARM.LoginHealth.Misconfigured()
	if le == nil {
		return since, nil
	}
	return since, fmt.Errorf("%s: %w", le.Misconfigured, le)
}

// New prepares and starts the provider (Prepare, then Start).
func New(ctx context.Context, cfg *config.Config, o Options) (*Cloud, error) {
	c, err := Prepare(cfg, o)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// maxStartupBackoff bounds the delay between start-up attempts.
const maxStartupBackoff = 30 * time.Second

// Start builds the ARM clients and reads the region's zones (the one ARM call at start-up).
// Login and ARM failures are retried with exponential backoff, logging each failure, until ctx
// ends: a transient outage delays start-up instead of crash-looping the CCM. A configuration
// mistake found on the way (config.IsInvalid: an endpoint that is not https, a metadata document
// without the configured cloud) is returned at once.
func (c *Cloud) Start(ctx context.Context) error {
	if c.started.Load() {
		return nil
	}
	delay := c.opts.StartupBackoff
	if delay <= 0 {
		delay = 2 * time.Second
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		err := c.start(ctx, c.opts)
		if err == nil {
			break
		}
		if config.IsInvalid(err) {
			return fmt.Errorf("invalid cloud config: %w", err)
		}
		// An attempt cut short by ctx says nothing new: report the failure before it.
		if lastErr == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			lastErr = err
		}
		if since, lerr := c.LoginMisconfigured(); lerr != nil && c.opts.LoginStepDownAfter > 0 && time.Since(since) >= c.opts.LoginStepDownAfter {
			return fmt.Errorf("azure cloud provider start-up: login has failed with a configuration error for %s: %w",
				time.Since(since).Round(time.Second), lerr)
		}
		klog.ErrorS(err, "Azure cloud provider start-up failed; retrying", "attempt", attempt, "retryIn", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("azure cloud provider start-up: %w (last error: %w)", ctx.Err(), lastErr)
		case <-time.After(delay):
		}
		// At most 30 s: nothing runs until the start succeeds, so a long wait after the login
		// server recovers is lost time, and two token requests a minute load no login server.
		if delay *= 2; delay > maxStartupBackoff {
			delay = maxStartupBackoff
		}
	}
	cfg := c.Config
	c.Resolver = nodes.NewResolver(cfg, c.Clients.Caches, nodes.NewNodeMap())
	wo := writers.OptionsFor(cfg)
	wo.Network, wo.NodeNetwork, wo.Compute = c.Clients.Network, c.Clients.NodeNetwork, c.Clients.Compute
	if c.Clients.NetworkPipeline != nil {
		wo.NetworkRaw = azstore.NewRawClient(c.Clients.NetworkPipeline, armjson.New())
	}
	wo.PollFrequency, wo.RouteGather, wo.DisableMerging = c.Clients.PollFrequency, c.opts.RouteGatherWindow, c.opts.DisableWriteMerging
	c.Writers = writers.New(wo)
	c.started.Store(true)
	klog.InfoS("Azure cloud provider started", "cloud", c.Clients.Environment.Name, "resourceManager", c.Clients.Environment.ResourceManagerEndpoint,
		"auth", c.Clients.AuthMethod, "subscription", cfg.SubscriptionID, "resourceGroup", cfg.ResourceGroup, "location", cfg.Location,
		"vmType", cfg.VMType, "zones", c.RegionZones())
	return nil
}

// Retire ends this provider generation's Azure writes (writers.Set.Close): a reload calls it
// once the generation's controllers are stopped and before the next generation starts. The
// changes still queued are refused (their callers retry on the next generation) and the
// batches in flight finish, or ctx ends first. A provider that never started has no writers.
func (c *Cloud) Retire(ctx context.Context) error {
	if !c.Started() {
		return nil
	}
	return c.Writers.Close(ctx)
}

// Started reports whether Start has succeeded.
func (c *Cloud) Started() bool { return c.started.Load() }

func (c *Cloud) start(ctx context.Context, o Options) error {
	if c.Clients == nil {
		clients, err := arm.New(ctx, c.Config, o.ARM)
		if err != nil {
			return err
		}
		c.Clients = clients
	}
	if c.Config.IsStackCloud() {
		return nil // Azure Stack has no zones.
	}
	return c.refreshZones(ctx)
}

func (c *Cloud) refreshZones(ctx context.Context) error {
	zones, err := c.Clients.RegionZones(ctx)
	if err != nil {
		return err
	}
	c.zonesMu.Lock()
	defer c.zonesMu.Unlock()
	if c.zones == nil {
		c.zones = map[string][]string{}
	}
	// Merge: a region never disappears because of a partial answer.
	for region, z := range zones {
		c.zones[region] = z
	}
	return nil
}

// RegionZones returns the availability zones of the configured region ("1", "2", "3"; empty
// for a region without zones).
func (c *Cloud) RegionZones() []string {
	c.zonesMu.RLock()
	defer c.zonesMu.RUnlock()
	return append([]string(nil), c.zones[arm.NormalizeLocation(c.Config.Location)]...)
}

// Initialize is called by the cloud-provider app with the client builder, after it serves its
// secure port and (with leader election) once this replica leads, before any controller starts.
// It starts the provider here, waiting through login and ARM outages while /healthz keeps
// answering; a configuration mistake found on the way is fatal.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	ctx, end := context.WithCancel(context.Background())
	go func() {
		<-stop
		end()
	}()
	c.life = ctx
	if !c.Started() {
		err := c.Start(ctx)
		if err != nil {
			if ctx.Err() != nil && !config.IsInvalid(err) {
				klog.InfoS("Azure cloud provider start-up stopped", "reason", err)
				return
			}
			c.fatal(err)
			return
		}
	}
	kube, err := clientBuilder.Client("azure-cloud-provider")
	if err != nil {
		klog.ErrorS(err, "Cannot create the cloud provider's Kubernetes client; events will not be recorded")
	} else {
		c.kube = kube
		b := record.NewBroadcaster()
		b.StartStructuredLogging(0)
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
		c.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "azure-cloud-provider"})
		// A reload initialises the next provider with a new stop channel and closes this one:
		// the broadcaster's goroutines end with it instead of piling up with every reload.
		go func() {
			<-stop
			b.Shutdown()
		}()
		if w := c.Config.LoginWarning(); w != "" && c.opts.ConfigObject != nil && c.opts.ARM.Credential == nil {
			c.recorder.Event(c.opts.ConfigObject, v1.EventTypeWarning, ReasonLoginMethodsIgnored, w)
		}
	}
	go c.zoneRefresher(stop)
}

func (c *Cloud) fatal(err error) {
	if c.opts.Fatal != nil {
		c.opts.Fatal(err)
		return
	}
	klog.ErrorS(err, "Azure cloud provider cannot start")
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}

func (c *Cloud) zoneRefresher(stop <-chan struct{}) {
	t := time.NewTicker(30 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := c.refreshZones(ctx); err != nil {
				klog.ErrorS(err, "Refreshing region zones failed; keeping the previous map")
			}
			cancel()
		}
	}
}

// SetInformers feeds the node map (cross-RG and on-prem node labels) from the shared informer.
// It runs before any controller asks the factory for an informer, so it also trims the node
// and service caches of what the CCM never reads (internal/trim).
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	c.informers = f
	if !c.opts.InformersTrimmed {
		if err := trim.Set(f.Core().V1().Nodes().Informer(), true); err != nil {
			klog.ErrorS(err, "Node cache not trimmed")
		}
		if err := trim.Set(f.Core().V1().Services().Informer(), false); err != nil {
			klog.ErrorS(err, "Service cache not trimmed")
		}
	}
	if !c.Started() {
		return
	}
	if err := feedNodeMap(c.Resolver.Nodes(), f.Core().V1().Nodes().Informer()); err != nil {
		klog.ErrorS(err, "Cannot watch nodes")
	}
}

// LoadBalancer returns the implementation Options.LoadBalancer builds (on the first call).
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	b := c.lbBuilder
	if b == nil || !c.Started() {
		return nil, false
	}
	c.lbOnce.Do(func() {
		life := c.life
		if life == nil { // never initialised: the plan subcommand, tests
			life = context.Background()
		}
		c.lb, c.lbErr = b(LoadBalancerDeps{Config: c.Config, Clients: c.Clients, Writers: c.Writers, Nodes: c.Resolver, Zones: c.RegionZones(),
			Kube: c.kube, Recorder: c.recorder, Informers: c.informers, Context: life})
		if c.lbErr != nil {
			klog.ErrorS(c.lbErr, "Load balancer implementation could not be built; services of type LoadBalancer are not served")
		}
		if c.lb != nil {
			c.lb = measuredLoadBalancer{LoadBalancer: c.lb, scope: c.opScope()}
		}
	})
	if c.lbErr != nil || c.lb == nil {
		return nil, false
	}
	return c.lb, true
}

// Instances is not implemented: InstancesV2 is.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 resolves nodes to VMs.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if !c.Started() {
		return nil, false
	}
	return &instances{c: c}, true
}

// Zones is not needed: InstancesV2 returns zone and region.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not implemented.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is available when routeTableName is configured.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	return c.RoutesOn(c.Writers)
}

// RoutesOn is Routes writing through set (the plan command's dry-run writers).
func (c *Cloud) RoutesOn(set *writers.Set) (cloudprovider.Routes, bool) {
	if c.Config.RouteTableName == "" {
		return nil, false
	}
	return &routeProvider{c: c, table: set.RouteTables.For(
		azureid.RouteTable(c.Config.NetworkSubscriptionID(), c.Config.RouteTableRG(), c.Config.RouteTableName))}, true
}

// ProviderName returns "azure".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID is true: the cluster is identified by --cluster-name (LB and resource names).
func (c *Cloud) HasClusterID() bool { return true }
