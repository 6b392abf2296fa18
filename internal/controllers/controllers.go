// Package controllers runs the CCM's own controllers (admin state, drift audit, Local pools, node
// out-of-service taint, PV zone labels, service gateway) beside the standard cloud-provider ones. Each is a Controller value; the CCM
// binary lists them explicitly and Initializers adds them to the standard set, so each is
// enabled by default and can be switched with --controllers (e.g. --controllers=*,-admin-state).
package controllers

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
)

// Context is what a controller gets when it starts.
type Context struct {
	// Controller is the cloud-provider app's controller context: client builder, shared
	// informers (the app starts them once every controller is set up), stop channel.
	Controller genericcontrollermanager.ControllerContext
	// Config is the completed CCM configuration (--cluster-name etc.).
	Config *cloudcontrollerconfig.CompletedConfig
	// ClientName is the name of the controller's Kubernetes client credentials.
	ClientName string
}

// ClusterName is --cluster-name.
func (c Context) ClusterName() string { return c.Config.ComponentConfig.KubeCloudShared.ClusterName }

// Informers is the informer factory the standard controllers (service, node, route) use: one
// cache per object type in the process. The app's controller context has a factory of its own;
// taking nodes and services from it held every Node and Service twice.
func (c Context) Informers() informers.SharedInformerFactory { return c.Config.SharedInformers }

// Kube is the controller's own Kubernetes client.
func (c Context) Kube() kubernetes.Interface {
	return c.Controller.ClientBuilder.ClientOrDie(c.ClientName)
}

// Recorder records the controller's events through kube as component, until ctx ends.
func (c Context) Recorder(ctx context.Context, kube kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(3)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}

// StartFunc starts a controller. It returns enabled=false if its configuration turns it off.
type StartFunc func(ctx context.Context, c Context) (ctrl controller.Interface, enabled bool, err error)

// Controller is one of the CCM's own controllers.
type Controller struct {
	// Name is the controller's name in --controllers.
	Name string
	// ClientName names its Kubernetes client credentials (and its events' source).
	ClientName string
	Start      StartFunc
}

// Running is the controller.Interface of a started controller.
type Running string

// Name implements controller.Interface.
func (r Running) Name() string { return string(r) }

// Initializers returns the standard cloud-provider controllers plus own, for
// app.NewCloudControllerManagerCommand. A name used twice, or one of a standard controller, is
// an error.
func Initializers(own []Controller) (map[string]app.ControllerInitFuncConstructor, error) {
	out := map[string]app.ControllerInitFuncConstructor{}
	for k, v := range app.DefaultInitFuncConstructors {
		out[k] = v
	}
	running := &instances{count: map[string]int{}}
	for _, c := range own {
		if _, dup := out[c.Name]; dup {
			return nil, fmt.Errorf("controller %q is listed twice or clashes with a standard cloud-provider controller", c.Name)
		}
		name, start := c.Name, c.Start
		out[c.Name] = app.ControllerInitFuncConstructor{
			InitContext: app.ControllerInitContext{ClientName: c.ClientName},
			Constructor: func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, _ cloudprovider.Interface) app.InitFunc {
				return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
					ctrl, enabled, err := start(ctx, Context{Controller: cc, Config: cfg, ClientName: ic.ClientName})
					if err == nil && enabled && cc.ControllerManagerMetrics != nil {
						running.started(cc.ControllerManagerMetrics, name)
						context.AfterFunc(ctx, func() { running.stopped(cc.ControllerManagerMetrics, name) })
					}
					return ctrl, enabled, err
				}
			},
		}
	}
	return out, nil
}

// instances reports the project's controllers to the controller manager's
// running_managed_controllers gauge, as the standard controllers report themselves. A cloud
// config reload starts a controller again on a new context while the old context's end may
// not have been seen yet, so the gauge goes to 0 only when the last instance has stopped.
type instances struct {
	mu    sync.Mutex
	count map[string]int
}

func (r *instances) started(m *controllersmetrics.ControllerManagerMetrics, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[name]++
	m.ControllerStarted(name)
}

func (r *instances) stopped(m *controllersmetrics.ControllerManagerMetrics, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[name]--
	if r.count[name] == 0 {
		m.ControllerStopped(name)
	}
}
