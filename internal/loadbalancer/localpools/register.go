package localpools

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

// Name is the controller's name in --controllers.
const Name = "local-pools"

func init() {
	controllers.Register(Name, "local-pools-controller", start)
}

type running struct{}

func (running) Name() string { return Name }

// start runs the updater only with multiple Standard load balancers: with one load balancer
// Local services use the cluster pool and there is nothing to update.
func start(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
	cloud, ok := cc.Cloud.(*provider.Cloud)
	if !ok {
		return nil, false, nil
	}
	lbi, ok := cloud.LoadBalancer()
	if !ok {
		return nil, false, nil
	}
	lb, ok := lbi.(*loadbalancer.LoadBalancer)
	if !ok {
		// Container-based pools (service gateway) have no node backend pools of Local services.
		klog.InfoS("Local pool updater not started: the load balancer implementation has no node backend pools", "implementation", fmt.Sprintf("%T", lbi))
		return nil, false, nil
	}
	if !lb.MultipleLoadBalancers() {
		klog.V(1).InfoS("Local pool updater not started: multipleStandardLoadBalancerConfigurations is not set")
		return nil, false, nil
	}
	RegisterMetrics()
	kube := cc.Controller.ClientBuilder.ClientOrDie(cc.ClientName)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "local-pools-controller"})

	f := cc.Controller.InformerFactory
	svcs, slices, nodes := f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), f.Core().V1().Nodes()
	u, err := New(Options{
		ClusterName: cc.Config.ComponentConfig.KubeCloudShared.ClusterName,
		LB:          lb,
		Services:    svcs.Lister(), Slices: slices.Lister(), Nodes: nodes.Lister(),
		HasSynced: []cache.InformerSynced{svcs.Informer().HasSynced, slices.Informer().HasSynced, nodes.Informer().HasSynced},
		Recorder:  recorder,
		Interval:  time.Duration(cloud.Config.LoadBalancerBackendPoolUpdateIntervalInSeconds) * time.Second,
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
	if lb.ServiceLabelSelectors() {
		// Label changes must re-run placement: see AnnotationPlacementLabels.
		if _, err := svcs.Informer().AddEventHandler(RelabelHandler(ctx, kube)); err != nil {
			return nil, false, err
		}
	}
	// Start is idempotent: the app starts the factory again after every controller is set up.
	f.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	go u.Run(ctx)
	return running{}, true, nil
}
