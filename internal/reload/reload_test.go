package reload

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	fakecloud "k8s.io/cloud-provider/fake"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/controller-manager/pkg/clientbuilder"
)

// recorder is a controller that notes the provider it got and runs until its context ends.
type recorder struct {
	mu      sync.Mutex
	started []cloudprovider.Interface
	ctxs    []context.Context
}

func (r *recorder) ctor() app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "rec"},
		Constructor: func(_ app.ControllerInitContext, _ *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				lb, _ := cloud.LoadBalancer() // as the service controller does when it is built
				// As some controllers do: a handler on a shared informer, then the factory
				// started with the controller's own context.
				if _, err := cc.InformerFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
					return nil, false, err
				}
				cc.InformerFactory.Start(ctx.Done())
				r.mu.Lock()
				defer r.mu.Unlock()
				r.started = append(r.started, lb.(*fakecloud.Cloud))
				r.ctxs = append(r.ctxs, ctx)
				return nil, true, nil
			}
		},
	}
}

func TestReplaceRestartsControllersOnTheNewProvider(t *testing.T) {
	first, second := &fakecloud.Cloud{Balancers: map[string]fakecloud.Balancer{}}, &fakecloud.Cloud{Balancers: map[string]fakecloud.Balancer{}}
	c := New(nil)
	if err := c.Replace(first); err != nil { // before leadership: no controllers to restart
		t.Fatal(err)
	}
	rec := &recorder{}
	ctors := c.Wrap(map[string]app.ControllerInitFuncConstructor{"rec": rec.ctor()})

	// What the app does once it leads: Initialize, SetInformers, then each controller.
	leaderCtx, stopLeading := context.WithCancel(context.Background())
	defer stopLeading()
	kube := kubefake.NewClientset()
	f := informers.NewSharedInformerFactory(kube, 0)
	cfg := (&cloudcontrollerconfig.Config{SharedInformers: f, LoopbackClientConfig: &restclient.Config{}}).Complete()
	c.Initialize(clientbuilder.SimpleControllerClientBuilder{ClientConfig: &restclient.Config{}}, leaderCtx.Done())
	c.SetInformers(f)
	cc := genericcontrollermanager.ControllerContext{InformerFactory: f, Stop: leaderCtx.Done()}
	if _, ok, err := ctors["rec"].Constructor(ctors["rec"].InitContext, cfg, c)(leaderCtx, cc); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}

	if err := c.Replace(second); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.started) != 2 || rec.started[0] != first || rec.started[1] != second {
		t.Fatalf("controller started on %v, want the first provider then the second", rec.started)
	}
	select {
	case <-rec.ctxs[0].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first generation's context was not cancelled")
	}
	if rec.ctxs[1].Err() != nil {
		t.Error("the new generation's context is already done")
	}
	if leaderCtx.Err() != nil {
		t.Error("leadership context touched")
	}
	if c.Generation() != 2 || c.Current() != second {
		t.Errorf("generation %d, current %p: want 2 and the second provider", c.Generation(), c.Current())
	}
	stopLeading()
	select {
	case <-rec.ctxs[1].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("losing leadership did not stop the controllers")
	}
}

// startRecorder records the stop channel the shared informer factory is started with.
type startRecorder struct {
	informers.SharedInformerFactory
	got <-chan struct{}
}

func (r *startRecorder) Start(stop <-chan struct{}) { r.got = stop }

// TestControllersCannotStopSharedInformers: a controller that starts the shared factory with
// its own (generation) context starts it until the leadership ends, so a reload that cancels
// the generation leaves the informers to the next one.
func TestControllersCannotStopSharedInformers(t *testing.T) {
	c := New(&fakecloud.Cloud{})
	rec := &startRecorder{SharedInformerFactory: informers.NewSharedInformerFactory(kubefake.NewClientset(), 0)}
	leader := make(chan struct{})
	ctors := c.Wrap(map[string]app.ControllerInitFuncConstructor{"x": {
		Constructor: func(_ app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, _ cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				cc.InformerFactory.Start(ctx.Done())
				cfg.SharedInformers.Start(ctx.Done())
				return nil, true, nil
			}
		},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	appShared := &startRecorder{SharedInformerFactory: informers.NewSharedInformerFactory(kubefake.NewClientset(), 0)}
	cfg := (&cloudcontrollerconfig.Config{SharedInformers: appShared, LoopbackClientConfig: &restclient.Config{}}).Complete()
	if _, _, err := ctors["x"].Constructor(app.ControllerInitContext{}, cfg, c)(ctx, genericcontrollermanager.ControllerContext{InformerFactory: rec, Stop: leader}); err != nil {
		t.Fatal(err)
	}
	if rec.got != (<-chan struct{})(leader) {
		t.Error("the controller context's factory was started with the controller's context, not the leadership's stop channel")
	}
	if appShared.got != (<-chan struct{})(leader) {
		t.Error("the app's shared factory was started with the controller's context, not the leadership's stop channel")
	}
}

// retiring is a provider that logs its Retire and Initialize calls.
type retiring struct {
	*fakecloud.Cloud
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (r *retiring) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, s+" "+r.name)
}

func (r *retiring) Retire(ctx context.Context) error {
	r.note("retire")
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline: a reload would wait for ever")
	}
	return nil
}

func (r *retiring) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	r.note("initialize")
	r.Cloud.Initialize(b, stop)
}

// TestReplaceRetiresThePreviousProviderFirst: the provider being replaced is retired (its
// Azure writes end) before the next one is initialised, once per reload, and never the one
// that serves; before leadership no provider wrote, so none is retired.
func TestReplaceRetiresThePreviousProviderFirst(t *testing.T) {
	var mu sync.Mutex
	var log []string
	p := func(name string) *retiring {
		return &retiring{Cloud: &fakecloud.Cloud{Balancers: map[string]fakecloud.Balancer{}}, name: name, mu: &mu, log: &log}
	}
	c := New(nil)
	if err := c.Replace(p("zero")); err != nil { // not leading yet
		t.Fatal(err)
	}
	leaderCtx, stopLeading := context.WithCancel(context.Background())
	defer stopLeading()
	c.Initialize(clientbuilder.SimpleControllerClientBuilder{ClientConfig: &restclient.Config{}}, leaderCtx.Done())
	for _, name := range []string{"one", "two"} {
		if err := c.Replace(p(name)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"initialize zero", "retire zero", "initialize one", "retire one", "initialize two"}
	if !slices.Equal(log, want) {
		t.Errorf("calls %q, want %q", log, want)
	}
}
