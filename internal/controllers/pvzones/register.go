package pvzones

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

// Name is the controller's name in --controllers.
const Name = "pv-zone-labels"

func init() {
	controllers.Register(Name, "pv-zone-labels-controller", start)
}

type running struct{}

func (running) Name() string { return Name }

func start(ctx context.Context, cc controllers.Context) (controller.Interface, bool, error) {
	cloud, ok := cc.Cloud.(*provider.Cloud)
	if !ok || cloud.Clients == nil {
		klog.InfoS("PV zone labels controller not started: not the Azure provider")
		return nil, false, nil
	}
	kube := cc.Controller.ClientBuilder.ClientOrDie(cc.ClientName)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "pv-zone-labels-controller"})
	RegisterMetrics()
	c, err := New(Options{Kube: kube, Volumes: cc.Controller.InformerFactory.Core().V1().PersistentVolumes(),
		Disks: disks.NewClient(cloud.Clients), Recorder: recorder, Location: cloud.Config.Location})
	if err != nil {
		return nil, false, err
	}
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	go c.Run(ctx)
	return running{}, true, nil
}
