// Package controllers is the registry of the CCM's own controllers (admin state, local pools,
// migration, ...). A controller package registers itself from init():
//
//	func init() {
//		controllers.Register("admin-state", "admin-state-controller", start)
//	}
//
// and the CCM binary blank-imports it. Every registered controller is enabled by default and
// can be switched with --controllers (e.g. --controllers=*,-admin-state), like the standard ones.
package controllers

import (
	"context"
	"fmt"
	"sort"
	"sync"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
)

// Context is what a controller gets when it starts.
type Context struct {
	// Controller is the cloud-provider app's controller context: client builder, shared
	// informers (start them is done by the app), stop channel.
	Controller genericcontrollermanager.ControllerContext
	// Config is the completed CCM configuration (--cluster-name etc.).
	Config *cloudcontrollerconfig.CompletedConfig
	// Cloud is the cloud provider (type-assert to *provider.Cloud for Azure specifics).
	Cloud cloudprovider.Interface
	// ClientName is the name used for the controller's Kubernetes client credentials.
	ClientName string
}

// StartFunc starts a controller. It returns enabled=false if its configuration turns it off.
type StartFunc func(ctx context.Context, c Context) (ctrl controller.Interface, enabled bool, err error)

var (
	mu       sync.Mutex
	registry = map[string]app.ControllerInitFuncConstructor{}
)

// Register adds a controller; a duplicate name panics (a programming error found at start).
func Register(name, clientName string, start StartFunc) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("controller %q registered twice", name))
	}
	if _, std := app.DefaultInitFuncConstructors[name]; std {
		panic(fmt.Sprintf("controller %q clashes with a standard cloud-provider controller", name))
	}
	registry[name] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientName},
		Constructor: func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				return start(ctx, Context{Controller: cc, Config: cfg, Cloud: cloud, ClientName: ic.ClientName})
			}
		},
	}
}

// Names lists the registered controllers.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Initializers returns the standard cloud-provider controllers plus the registered ones, for
// app.NewCloudControllerManagerCommand.
func Initializers() map[string]app.ControllerInitFuncConstructor {
	mu.Lock()
	defer mu.Unlock()
	out := map[string]app.ControllerInitFuncConstructor{}
	for k, v := range app.DefaultInitFuncConstructors {
		out[k] = v
	}
	for k, v := range registry {
		out[k] = v
	}
	return out
}
