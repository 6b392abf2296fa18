package nodeipam

import (
	"context"
	"fmt"

	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/controllers/nodeipam/ipam"
)

// Name is the controller's name in --controllers (the existing provider's).
const Name = "node-ipam"

// Deps are what the controller is started with.
type Deps struct {
	// Allocate is --allocate-node-cidrs; Flags the rest of the CIDR flags.
	Allocate bool
	Flags    ipam.Flags
}

// Start runs the controller when --allocate-node-cidrs is set. Invalid flags stop the CCM with
// the flag named.
func Start(ctx context.Context, cc controllers.Context, d Deps) (controller.Interface, bool, error) {
	if !d.Allocate {
		klog.InfoS("Node-ipam controller not started: --allocate-node-cidrs=false")
		return nil, false, nil
	}
	specs, warnings, err := ipam.Plan(d.Flags)
	if err != nil {
		return nil, false, fmt.Errorf("node-ipam: %w", err)
	}
	for _, w := range warnings {
		klog.ErrorS(nil, "Node IPAM flag not applied", "reason", w)
	}
	for _, s := range specs {
		klog.InfoS("Node-ipam pool", "clusterCIDR", s.Cluster, "nodeMask", s.NodeBits, "reserved", s.Reserved)
	}
	RegisterMetrics()
	kube := cc.Kube()
	c, err := New(Options{Kube: kube, Nodes: cc.Informers().Core().V1().Nodes(), Specs: specs,
		Recorder: cc.Recorder(ctx, kube, "node-ipam-controller")})
	if err != nil {
		return nil, false, fmt.Errorf("node-ipam: %w", err)
	}
	go c.Run(ctx)
	return controllers.Running(Name), true, nil
}
