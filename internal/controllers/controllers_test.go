package controllers

import (
	"context"
	"testing"

	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
)

func TestInitializersAddOwnControllersToStandardOnes(t *testing.T) {
	started := ""
	own := []Controller{{Name: "test-controller", ClientName: "test-client", Start: func(ctx context.Context, c Context) (controller.Interface, bool, error) {
		started = c.ClientName
		return Running("test-controller"), true, nil
	}}}
	init, err := Initializers(own)
	if err != nil {
		t.Fatal(err)
	}
	for _, std := range []string{names.CloudNodeController, names.ServiceLBController, names.NodeRouteController, names.CloudNodeLifecycleController} {
		if _, ok := init[std]; !ok {
			t.Errorf("standard controller %s missing", std)
		}
	}
	ctor, ok := init["test-controller"]
	if !ok {
		t.Fatal("own controller missing")
	}
	fn := ctor.Constructor(ctor.InitContext, nil, nil)
	if ctrl, enabled, err := fn(context.Background(), genericcontrollermanager.ControllerContext{}); err != nil || !enabled || started != "test-client" || ctrl.Name() != "test-controller" {
		t.Fatalf("start: enabled=%v err=%v client=%q", enabled, err, started)
	}
	if len(app.ControllerNames(init)) != len(app.DefaultInitFuncConstructors)+1 {
		t.Fatalf("names: %v", app.ControllerNames(init))
	}
	for _, bad := range [][]Controller{append(own, own[0]), {{Name: names.ServiceLBController}}} {
		if _, err := Initializers(bad); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
