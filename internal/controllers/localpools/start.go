package localpools

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
)

// Name is the controller's name in --controllers.
const Name = "local-pools"

// Deps are what the controller is started with.
type Deps struct {
	// Placer writes the dedicated pools; nil with one load balancer, where Local services use
	// the cluster pool and there is nothing to update (the controller is then not started).
	Placer *multislb.Placer
	// Interval between flushes (loadBalancerBackendPoolUpdateIntervalInSeconds).
	Interval time.Duration
}

// Start runs the updater.
func Start(ctx context.Context, cc controllers.Context, d Deps) (controller.Interface, bool, error) {
	if d.Placer == nil {
		klog.V(1).InfoS("Local pool updater not started: multipleStandardLoadBalancerConfigurations is not set")
		return nil, false, nil
	}
	RegisterMetrics()
	kube := cc.Kube()
	f := cc.Informers()
	svcs, slices, nodes := f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), f.Core().V1().Nodes()
	u, err := New(Options{
		ClusterName: cc.ClusterName(),
		LB:          d.Placer,
		Services:    svcs.Lister(), Nodes: nodes.Lister(),
		HasSynced: []cache.InformerSynced{svcs.Informer().HasSynced, slices.Informer().HasSynced, nodes.Informer().HasSynced},
		Recorder:  cc.Recorder(ctx, kube, "local-pools-controller"),
		Interval:  d.Interval,
	})
	if err != nil {
		return nil, false, err
	}
	if _, err := slices.Informer().AddEventHandler(u.SliceHandler()); err != nil {
		return nil, false, err
	}
	if _, err := svcs.Informer().AddEventHandler(u.ServiceHandler()); err != nil {
		return nil, false, err
	}
	if d.Placer.ServiceLabelSelectors() {
		// Label changes must re-run placement: see AnnotationPlacementLabels.
		if _, err := svcs.Informer().AddEventHandler(RelabelHandler(ctx, kube)); err != nil {
			return nil, false, err
		}
	}
	// Start is idempotent: the app starts the factory again after every controller is set up.
	f.Start(ctx.Done())
	go u.Run(ctx)
	return controllers.Running(Name), true, nil
}
