package servicegateway

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway"
	"github.com/azure-ccm/azure-ccm/internal/servicegateway/updater"
)

// Name is the controller's name in --controllers.
const Name = "service-gateway"

// Workers of the Kubernetes side (cheap: they only feed the tracker and patch Services).
const workers = 4

// Deps are what the controller is started with.
type Deps struct {
	Config        *config.Config
	Network       *armnetwork.ClientFactory
	PollFrequency time.Duration
}

// Start runs the controller when serviceGatewayEnabled is set.
func Start(ctx context.Context, cc controllers.Context, d Deps) (controller.Interface, bool, error) {
	if !servicegateway.Enabled(d.Config) {
		klog.V(2).InfoS("Service gateway controller not started: serviceGatewayEnabled is false")
		return nil, false, nil
	}
	cfg := d.Config
	kube := cc.Kube()
	updater.RegisterMetrics()
	scope := updater.Scope{SubscriptionID: cfg.NetworkSubscriptionID(), ResourceGroup: cfg.ResourceGroup, Location: cfg.Location,
		ClusterName: cc.ClusterName(), VNetID: azureid.VirtualNetwork(cfg.NetworkSubscriptionID(), cfg.VnetRG(), cfg.VnetName)}
	podFactory, pods := EgressPodsInformer(kube, 0)
	f := cc.Informers()
	c, err := New(Options{Kube: kube, Services: f.Core().V1().Services(), Nodes: f.Core().V1().Nodes(),
		EndpointSlices: f.Discovery().V1().EndpointSlices(), EgressPods: pods, Recorder: cc.Recorder(ctx, kube, "service-gateway-controller"),
		Azure: &updater.Azure{Scope: scope, Network: d.Network, PollFrequency: d.PollFrequency}})
	if err != nil {
		return nil, false, err
	}
	podFactory.Start(ctx.Done())
	go c.Run(ctx, workers)
	klog.InfoS("Service gateway controller started", "gateway", scope.GatewayID(), "vnet", scope.VNetID)
	return controllers.Running(Name), true, nil
}
