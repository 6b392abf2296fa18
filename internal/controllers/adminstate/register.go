package adminstate

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

// Name is the controller's name in --controllers.
const Name = "admin-state"

func init() {
	controllers.Register(Name, "admin-state-controller", start)
}

type running struct{ c *Controller }

func (r running) Name() string { return Name }

func start(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
	cloud, ok := cc.Cloud.(*provider.Cloud)
	if !ok {
		return nil, false, nil
	}
	if !cloud.Config.AdminStateEnabled() {
		klog.InfoS("Admin-state controller disabled by azure.json enableLoadBalancerAdminState=false")
		return nil, false, nil
	}
	lbi, ok := cloud.LoadBalancer()
	if !ok {
		klog.InfoS("Admin-state controller not started: no load balancer implementation")
		return nil, false, nil
	}
	lb, ok := lbi.(*loadbalancer.LoadBalancer)
	if !ok {
		// Container-based pools (service gateway) have no node backend pools to set a state on.
		klog.InfoS("Admin-state controller not started: the load balancer implementation has no node backend pools", "implementation", fmt.Sprintf("%T", lbi))
		return nil, false, nil
	}
	clusterName := cc.Config.ComponentConfig.KubeCloudShared.ClusterName
	kube := cc.Controller.ClientBuilder.ClientOrDie(cc.ClientName)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "admin-state-controller"})

	eventFactory, events := EventsInformer(kube, 0)
	c, err := New(Options{ClusterName: clusterName, Kube: kube, Nodes: cc.Controller.InformerFactory.Core().V1().Nodes(),
		Events: events, Pools: lb, Recorder: recorder})
	if err != nil {
		return nil, false, err
	}
	lb.SetPoolEntriesHook(c.PoolEntriesHook)
	eventFactory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	go c.Run(ctx)
	return running{c}, true, nil
}
