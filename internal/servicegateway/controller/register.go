package controller

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
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/updater"
)

// Name is the controller's name in --controllers.
const Name = "service-gateway"

func init() {
	controllers.Register(Name, "service-gateway-controller", start)
}

type running struct{}

func (running) Name() string { return Name }

// Workers of the Kubernetes side (cheap: they only feed the tracker and patch Services).
const workers = 4

func start(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
	cloud, ok := cc.Cloud.(*provider.Cloud)
	if !ok || cloud.Clients == nil || !servicegateway.Enabled(cloud.Config) {
		klog.V(2).InfoS("Service gateway controller not started: serviceGatewayEnabled is false")
		return nil, false, nil
	}
	cfg := cloud.Config
	clusterName := cc.Config.ComponentConfig.KubeCloudShared.ClusterName
	kube := cc.Controller.ClientBuilder.ClientOrDie(cc.ClientName)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "service-gateway-controller"})
	updater.RegisterMetrics()
	scope := updater.Scope{SubscriptionID: cfg.NetworkSubscriptionID(), ResourceGroup: cfg.ResourceGroup, Location: cfg.Location,
		ClusterName: clusterName,
		VNetID: fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
			cfg.NetworkSubscriptionID(), cfg.VnetRG(), cfg.VnetName)}
	podFactory, pods := EgressPodsInformer(kube, 0)
	f := cc.Controller.InformerFactory
	c := New(Options{Kube: kube, Services: f.Core().V1().Services(), Nodes: f.Core().V1().Nodes(),
		EndpointSlices: f.Discovery().V1().EndpointSlices(), EgressPods: pods, Recorder: recorder,
		Azure: &updater.Azure{Scope: scope, Network: cloud.Clients.Network, PollFrequency: cloud.Clients.PollFrequency}})
	podFactory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	go c.Run(ctx, workers)
	klog.InfoS("Service gateway controller started", "gateway", scope.GatewayID(), "vnet", scope.VNetID)
	return running{}, true, nil
}
