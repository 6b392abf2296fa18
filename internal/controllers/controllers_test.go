package controllers

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/component-base/metrics/legacyregistry"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
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

// TestOwnControllersReportRunning: an own controller sets the controller manager's
// running_managed_controllers gauge when it starts and clears it when its context ends; a
// controller its configuration turns off is not reported.
func TestOwnControllersReportRunning(t *testing.T) {
	controllersmetrics.Register()
	own := []Controller{
		{Name: "reported-controller", Start: func(context.Context, Context) (controller.Interface, bool, error) {
			return Running("reported-controller"), true, nil
		}},
		{Name: "off-controller", Start: func(context.Context, Context) (controller.Interface, bool, error) {
			return nil, false, nil
		}},
	}
	init, err := Initializers(own)
	if err != nil {
		t.Fatal(err)
	}
	cc := genericcontrollermanager.ControllerContext{ControllerManagerMetrics: controllersmetrics.NewControllerManagerMetrics("test-manager")}
	start := func(name string) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		ctor := init[name]
		if _, _, err := ctor.Constructor(ctor.InitContext, nil, nil)(ctx, cc); err != nil {
			t.Fatal(err)
		}
		return cancel
	}
	stop := start("reported-controller")
	if got := runningGauge(t, "reported-controller"); got != "1" {
		t.Fatalf("after the start: %s, want 1", got)
	}
	stop()
	testutil.Eventually(t, "the gauge cleared after the stop", func() error {
		if got := runningGauge(t, "reported-controller"); got != "0" {
			return fmt.Errorf("gauge %s", got)
		}
		return nil
	})
	start("off-controller")()
	if got := runningGauge(t, "off-controller"); got != "absent" {
		t.Errorf("a controller turned off by its configuration: %s, want no series", got)
	}
}

// TestInstancesClearOnlyWhenTheLastStops: a reload starts a controller again before the old
// instance's stop is seen; the gauge must stay 1 until every instance has stopped.
func TestInstancesClearOnlyWhenTheLastStops(t *testing.T) {
	controllersmetrics.Register()
	m := controllersmetrics.NewControllerManagerMetrics("test-manager")
	r := &instances{count: map[string]int{}}
	const name = "reloaded-controller"
	steps := []struct {
		start bool
		want  string
	}{{true, "1"}, {true, "1"}, {false, "1"}, {false, "0"}, {true, "1"}, {false, "0"}}
	for i, s := range steps {
		if s.start {
			r.started(m, name)
		} else {
			r.stopped(m, name)
		}
		if got := runningGauge(t, name); got != s.want {
			t.Fatalf("step %d (start %t): gauge %s, want %s", i, s.start, got, s.want)
		}
	}
}

// runningGauge is the running_managed_controllers value of a controller under test-manager.
func runningGauge(t *testing.T, name string) string {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "running_managed_controllers" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] == name && labels["manager"] == "test-manager" {
				return fmt.Sprint(m.GetGauge().GetValue())
			}
		}
	}
	return "absent"
}
