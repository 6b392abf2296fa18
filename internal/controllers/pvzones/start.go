package pvzones

import (
	"context"

	"k8s.io/controller-manager/controller"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
)

// Name is the controller's name in --controllers.
const Name = "pv-zone-labels"

// Deps are what the controller is started with.
type Deps struct {
	Disks    DiskGetter
	Location string
}

// Start runs the controller.
func Start(ctx context.Context, cc controllers.Context, d Deps) (controller.Interface, bool, error) {
	kube := cc.Kube()
	RegisterMetrics()
	c, err := New(Options{Kube: kube, Volumes: cc.Informers().Core().V1().PersistentVolumes(),
		Disks: d.Disks, Recorder: cc.Recorder(ctx, kube, "pv-zone-labels-controller"), Location: d.Location})
	if err != nil {
		return nil, false, err
	}
	go c.Run(ctx)
	return controllers.Running(Name), true, nil
}
