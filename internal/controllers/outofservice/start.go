package outofservice

import (
	"context"

	"k8s.io/controller-manager/controller"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
)

// Name is the controller's name in --controllers.
const Name = "node-out-of-service"

// Start runs the controller.
func Start(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
	c, err := New(Options{Kube: cc.Kube(), Nodes: cc.Informers().Core().V1().Nodes()})
	if err != nil {
		return nil, false, err
	}
	go c.Run(ctx)
	return controllers.Running(Name), true, nil
}
