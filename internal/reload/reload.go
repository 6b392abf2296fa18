// Package reload lets the CCM swap its cloud provider and restart the controllers that use it,
// in-process and under the same leadership: the cloud-provider app gets a Cloud that delegates
// to the current provider, and controller constructors wrapped by Wrap, which run every
// controller under a context that Replace cancels before starting them again on the new
// provider. The leader election, its lease and the process are untouched.
package reload

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
)

// Cloud is a cloudprovider.Interface that delegates to the current provider.
type Cloud struct {
	// mu guards cur and generation only: controllers ask for the provider while they start.
	mu  sync.Mutex
	cur cloudprovider.Interface
	// generation counts providers: 1 for the first.
	generation int

	// restart serialises controller starts (the app's and Replace's) and guards the rest.
	restart sync.Mutex
	// Set by the app once this replica leads: what Initialize and SetInformers got.
	builder   cloudprovider.ControllerClientBuilder
	stop      <-chan struct{}
	informers informers.SharedInformerFactory
	// gen is the context of the current generation of controllers (and of the provider's own
	// background work); Replace cancels it.
	gen    context.Context
	cancel context.CancelFunc
	// started are the controllers the app started, in start order.
	started []*started
}

type started struct {
	name string
	ctor app.ControllerInitFuncConstructor
	cfg  *cloudcontrollerconfig.CompletedConfig
	cc   genericcontrollermanager.ControllerContext
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

// New returns a Cloud serving first (nil: none until the first Replace).
func New(first cloudprovider.Interface) *Cloud {
	c := &Cloud{cur: first}
	if first != nil {
		c.generation = 1
	}
	return c
}

// Current is the provider in use.
func (c *Cloud) Current() cloudprovider.Interface {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Generation counts the providers served so far (1 before any Replace).
func (c *Cloud) Generation() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.generation
}

// Wrap returns the constructors with each controller run under the generation's context and
// given this Cloud, so that Replace can stop and start them again.
func (c *Cloud) Wrap(ctors map[string]app.ControllerInitFuncConstructor) map[string]app.ControllerInitFuncConstructor {
	out := make(map[string]app.ControllerInitFuncConstructor, len(ctors))
	for name, ctor := range ctors {
		out[name] = app.ControllerInitFuncConstructor{
			InitContext: ctor.InitContext,
			Constructor: func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, _ cloudprovider.Interface) app.InitFunc {
				return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
					c.restart.Lock()
					defer c.restart.Unlock()
					gen := c.generationContext(ctx)
					cc = leaderScoped(cc)
					leaderScopeConfig(cfg, cc.Stop)
					c.started = append(c.started, &started{name: name, ctor: ctor, cfg: cfg, cc: cc})
					return ctor.Constructor(ic, cfg, c)(gen, cc)
				}
			},
		}
	}
	return out
}

// leaderScoped makes Start of the shared informer factory use the leadership's stop channel,
// whatever a controller passes: a controller that starts the factory with its own context
// would otherwise stop informers that other controllers, and the next generation, share.
func leaderScoped(cc genericcontrollermanager.ControllerContext) genericcontrollermanager.ControllerContext {
	if _, ok := cc.InformerFactory.(leaderScopedFactory); ok || cc.InformerFactory == nil {
		return cc
	}
	cc.InformerFactory = leaderScopedFactory{SharedInformerFactory: cc.InformerFactory, stop: cc.Stop}
	return cc
}

// leaderScopeConfig does the same for the app's shared informers (the factory the standard
// controllers, and the project's through controllers.Context.Informers, take their caches from).
// The app starts that factory with the same stop channel.
func leaderScopeConfig(cfg *cloudcontrollerconfig.CompletedConfig, stop <-chan struct{}) {
	if cfg == nil || cfg.SharedInformers == nil {
		return
	}
	if _, ok := cfg.SharedInformers.(leaderScopedFactory); ok {
		return
	}
	cfg.SharedInformers = leaderScopedFactory{SharedInformerFactory: cfg.SharedInformers, stop: stop}
}

type leaderScopedFactory struct {
	informers.SharedInformerFactory
	stop <-chan struct{}
}

// Start starts the informers asked for so far until the leadership ends.
func (f leaderScopedFactory) Start(<-chan struct{}) { f.SharedInformerFactory.Start(f.stop) }

// generationContext returns the current generation's context, creating it under parent on the
// first call. Called with restart held.
func (c *Cloud) generationContext(parent context.Context) context.Context {
	if c.gen == nil {
		c.gen, c.cancel = context.WithCancel(parent)
	}
	return c.gen
}

// Replace makes next the provider. When controllers run (this replica leads), it stops them,
// retires the previous provider (a Retirer: its writes in flight end first, within
// retireTimeout), initialises next as the app initialised the previous one, and starts them
// again on next; then it starts informers they newly asked for. The previous provider's
// background work stops with its generation.
func (c *Cloud) Replace(next cloudprovider.Interface) error {
	c.restart.Lock()
	defer c.restart.Unlock()
	c.mu.Lock()
	prev := c.cur
	c.cur = next
	c.generation++
	gen := c.generation
	c.mu.Unlock()
	if c.builder == nil {
		// Not leading: the app initialises the current provider when this replica leads.
		return nil
	}
	parent := wait.ContextForChannel(c.stop)
	if c.cancel != nil {
		c.cancel()
	}
	if r, ok := prev.(Retirer); ok && prev != next {
		retire(parent, r, gen-1)
	}
	c.gen, c.cancel = context.WithCancel(parent)
	next.Initialize(c.builder, c.gen.Done())
	if iu, ok := next.(cloudprovider.InformerUser); ok && c.informers != nil {
		iu.SetInformers(c.informers)
	}
	var errs []error
	for _, s := range c.started {
		ic := s.ctor.InitContext
		if _, ok, err := s.ctor.Constructor(ic, s.cfg, c)(c.gen, s.cc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		} else if !ok {
			klog.InfoS("Controller not started again after the cloud config reload (its configuration turns it off)", "controller", s.name)
		}
	}
	names := make([]string, 0, len(c.started))
	for _, s := range c.started {
		names = append(names, s.name)
	}
	sort.Strings(names)
	klog.InfoS("Controllers restarted on the new cloud provider", "generation", gen, "controllers", names)
	// Informers asked for by the new controllers only; started ones are left alone.
	if len(c.started) > 0 {
		s := c.started[0]
		s.cc.InformerFactory.Start(s.cc.Stop)
		s.cfg.SharedInformers.Start(s.cc.Stop)
	}
	if len(errs) > 0 {
		return fmt.Errorf("restarting controllers: %v", errs)
	}
	return nil
}

// Retirer is a provider that can end its own Azure writes (the project's provider): the
// changes its stopped controllers still had queued are refused, and the writes in flight
// finish before Retire returns, or ctx ends first.
type Retirer interface {
	Retire(ctx context.Context) error
}

// retireTimeout bounds how long a reload waits for the previous provider's writes in flight. A
// write takes seconds; a reload that waited as long as a write may take (minutes, polling a
// long-running operation) would hold every controller stopped meanwhile.
const retireTimeout = time.Minute

// retire waits for the previous provider's writes to end before the next one starts, so that
// none of them lands after a write of the next provider (which would undo it when both change
// the same resource).
func retire(parent context.Context, r Retirer, gen int) {
	ctx, cancel := context.WithTimeout(parent, retireTimeout)
	defer cancel()
	start := time.Now()
	if err := r.Retire(ctx); err != nil {
		klog.ErrorS(err, "The previous cloud provider's Azure writes did not finish within the bound; the new provider starts now, and one of them may land after its first writes",
			"generation", gen, "bound", retireTimeout)
		return
	}
	klog.V(2).InfoS("The previous cloud provider's Azure writes have ended", "generation", gen, "waited", time.Since(start).Round(time.Millisecond))
}

// Initialize records the client builder (for providers to come) and initialises the current
// provider under the generation's context.
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.restart.Lock()
	defer c.restart.Unlock()
	c.builder, c.stop = b, stop
	gen := c.generationContext(wait.ContextForChannel(stop))
	c.Current().Initialize(b, gen.Done())
}

// SetInformers records the informers and hands them to the current provider.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	c.restart.Lock()
	defer c.restart.Unlock()
	c.informers = f
	if iu, ok := c.Current().(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}

// The rest delegates to the current provider.

// LoadBalancer implements cloudprovider.Interface.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.Current().LoadBalancer() }

// Instances implements cloudprovider.Interface.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return c.Current().Instances() }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.Current().InstancesV2() }

// Zones implements cloudprovider.Interface.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return c.Current().Zones() }

// Clusters implements cloudprovider.Interface.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return c.Current().Clusters() }

// Routes implements cloudprovider.Interface.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return c.Current().Routes() }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return c.Current().ProviderName() }

// HasClusterID implements cloudprovider.Interface.
func (c *Cloud) HasClusterID() bool { return c.Current().HasClusterID() }
