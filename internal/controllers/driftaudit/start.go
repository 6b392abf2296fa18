package driftaudit

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
)

// Name is the controller's name in --controllers.
const Name = "drift-audit"

// DefaultPeriod is the period of the existing provider's periodic full reconcile (the service
// controller's node sync, 100 s).
const DefaultPeriod = 100 * time.Second

// DefaultWorkers is the default of --drift-audit-workers.
const DefaultWorkers = 4

// DefaultRepairs bounds the repairs of one pass run at once.
const DefaultRepairs = 16

// Deps are what the controller is started with.
type Deps struct {
	// Auditor is the node-based load balancer implementation's (nil in service-gateway mode or
	// when there is none: the controller is then not started).
	Auditor func() (Auditor, error)
	// Period is --drift-audit-period; 0 turns the audit off.
	Period time.Duration
	// Workers (--drift-audit-workers) check services at once; Repairs repair them at once.
	Workers, Repairs int
}

// Start runs the controller.
func Start(ctx context.Context, cc controllers.Context, d Deps) (controller.Interface, bool, error) {
	if d.Period <= 0 {
		klog.InfoS("Drift audit disabled by --drift-audit-period=0")
		return nil, false, nil
	}
	if d.Auditor == nil {
		klog.InfoS("Drift audit not started: there is no node-based load balancer implementation (service gateway mode or none)")
		return nil, false, nil
	}
	a, err := d.Auditor()
	if err != nil {
		return nil, false, err
	}
	if a == nil {
		klog.InfoS("Drift audit not started: there is no node-based load balancer implementation (service gateway mode or none)")
		return nil, false, nil
	}
	RegisterMetrics()
	kube := cc.Kube()
	f := cc.Informers()
	svcs, nodes := f.Core().V1().Services(), f.Core().V1().Nodes()
	c, err := New(Options{
		ClusterName: cc.ClusterName(), Auditor: a, Kube: kube,
		Services: svcs.Lister(), Nodes: nodes.Lister(),
		HasSynced: []cache.InformerSynced{svcs.Informer().HasSynced, nodes.Informer().HasSynced},
		Recorder:  cc.Recorder(ctx, kube, "drift-audit-controller"),
		Period:    d.Period, Workers: d.Workers, Repairs: d.Repairs,
	})
	if err != nil {
		return nil, false, err
	}
	// Start is idempotent: the app starts the factory again after every controller is set up.
	f.Start(ctx.Done())
	go c.Run(ctx)
	return controllers.Running(Name), true, nil
}
