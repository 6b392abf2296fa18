package controllers

import (
	"context"
	"testing"

	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
)

func TestRegisterAddsToStandardControllers(t *testing.T) {
	started := ""
	Register("test-controller", "test-client", func(ctx context.Context, c Context) (controller.Interface, bool, error) {
		started = c.ClientName
		return nil, true, nil
	})
	init := Initializers()
	for _, std := range []string{names.CloudNodeController, names.ServiceLBController, names.NodeRouteController, names.CloudNodeLifecycleController} {
		if _, ok := init[std]; !ok {
			t.Errorf("standard controller %s missing", std)
		}
	}
	ctor, ok := init["test-controller"]
	if !ok {
		t.Fatal("registered controller missing")
	}
	fn := ctor.Constructor(ctor.InitContext, nil, nil)
	if _, enabled, err := fn(context.Background(), genericcontrollermanager.ControllerContext{}); err != nil || !enabled || started != "test-client" {
		t.Fatalf("start: enabled=%v err=%v client=%q", enabled, err, started)
	}
	if len(app.ControllerNames(init)) != len(app.DefaultInitFuncConstructors)+1 {
		t.Fatalf("names: %v", app.ControllerNames(init))
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration must panic")
		}
	}()
	Register("test-controller", "x", nil)
}
