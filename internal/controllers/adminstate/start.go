package adminstate

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// Name is the controller's name in --controllers.
const Name = "admin-state"

// Deps are what the controller is started with.
type Deps struct {
	// Enabled is azure.json enableLoadBalancerAdminState; NodePools says that the cluster's
	// load balancers have node backend pools (not service-gateway mode).
	Enabled, NodePools bool
	LoadBalancers      *writer.Registry[armnetwork.LoadBalancer]
	LoadBalancerIDs    []string
}

// Start runs the controller.
func Start(ctx context.Context, cc controllers.Context, d Deps) (controller.Interface, bool, error) {
	if !d.Enabled {
		klog.InfoS("Admin-state controller disabled by azure.json enableLoadBalancerAdminState=false")
		return nil, false, nil
	}
	if !d.NodePools {
		// Container-based pools (service gateway) have no node backend pools to set a state on.
		klog.InfoS("Admin-state controller not started: the load balancers have no node backend pools")
		return nil, false, nil
	}
	kube := cc.Kube()
	eventFactory, events := EventsInformer(kube, 0)
	c, err := New(Options{ClusterName: cc.ClusterName(), Kube: kube, Nodes: cc.Informers().Core().V1().Nodes(),
		Events: events, LoadBalancers: d.LoadBalancers, LoadBalancerIDs: d.LoadBalancerIDs,
		Recorder: cc.Recorder(ctx, kube, "admin-state-controller")})
	if err != nil {
		return nil, false, err
	}
	eventFactory.Start(ctx.Done())
	go c.Run(ctx)
	return controllers.Running(Name), true, nil
}
