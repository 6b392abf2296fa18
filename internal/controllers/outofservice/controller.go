package outofservice

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/cloud-provider/node/helpers"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers/keyqueue"
)

// Options configure New.
type Options struct {
	Kube  kubernetes.Interface
	Nodes coreinformers.NodeInformer
	// RetryBase/RetryMax bound the per-node backoff after a failed patch (default 1s and 5m).
	RetryBase, RetryMax time.Duration
}

// Controller adds and removes the out-of-service taint.
type Controller struct {
	o      Options
	lister corelisters.NodeLister
	synced cache.InformerSynced
	queue  *keyqueue.Queue[string]
}

// New wires the controller to the node informer; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Kube == nil || o.Nodes == nil {
		return nil, fmt.Errorf("outofservice: Kube and Nodes are required")
	}
	c := &Controller{o: o, lister: o.Nodes.Lister(), synced: o.Nodes.Informer().HasSynced}
	c.queue = keyqueue.New(keyqueue.Options[string]{Name: "node-out-of-service", RetryBase: o.RetryBase, RetryMax: o.RetryMax,
		Sync: c.sync,
		Failed: func(name string, err error, retries int) {
			klog.ErrorS(err, "Node out-of-service taint not updated; retrying", "node", name, "retries", retries)
		}})
	_, err := o.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	return c, err
}

// enqueue queues the nodes that need a change: the informer's events and resyncs retry
// what a failure left undone.
func (c *Controller) enqueue(obj any) {
	if n, ok := obj.(*v1.Node); ok && Plan(n) != None {
		c.queue.Add(n.Name)
	}
}

// Run handles nodes until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("Starting node out-of-service controller")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	c.queue.Start(ctx, 1)
	<-ctx.Done()
}

func (c *Controller) sync(_ context.Context, name string) error {
	node, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	taint := &v1.Taint{Key: v1.TaintNodeOutOfService, Effect: v1.TaintEffectNoExecute}
	switch Plan(node) {
	case AddTaint:
		klog.InfoS("Node is shut down and NotReady: adding the out-of-service taint", "node", name)
		return helpers.AddOrUpdateTaintOnNode(c.o.Kube, name, taint)
	case RemoveTaint:
		klog.InfoS("Node is Ready: removing the out-of-service taint", "node", name)
		return helpers.RemoveTaintOffNode(c.o.Kube, name, node, taint)
	}
	return nil
}
