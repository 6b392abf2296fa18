package outofservice

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azure-ccm/azure-ccm/internal/testutil"
)

func hasOOS(n *v1.Node) bool { return hasTaint(n, v1.TaintNodeOutOfService, v1.TaintEffectNoExecute) }

func TestControllerTaintsShutDownNodesAndUntaintsReadyOnes(t *testing.T) {
	shutdown := v1.Taint{Key: "node.cloudprovider.kubernetes.io/shutdown", Effect: v1.TaintEffectNoSchedule}
	down := node(v1.ConditionFalse, shutdown)
	down.Name = "down"
	back := node(v1.ConditionTrue, v1.Taint{Key: v1.TaintNodeOutOfService, Effect: v1.TaintEffectNoExecute}, v1.Taint{Key: "keep", Effect: v1.TaintEffectNoSchedule})
	back.Name = "back"
	idle := node(v1.ConditionFalse)
	idle.Name = "idle"
	kube := fake.NewClientset(down, back, idle)
	f := informers.NewSharedInformerFactory(kube, 0)
	c, err := New(Options{Kube: kube, Nodes: f.Core().V1().Nodes(), RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	go c.Run(ctx)

	get := func(name string) *v1.Node {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	testutil.WaitFor(t, "shut-down NotReady node tainted out-of-service, Ready node untainted",
		func() bool { return hasOOS(get("down")) && !hasOOS(get("back")) })
	if n := get("back"); len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "keep" {
		t.Errorf("other taints of the Ready node changed: %+v", n.Spec.Taints)
	}
	if hasOOS(get("idle")) {
		t.Error("a NotReady node without the shutdown taint was tainted")
	}

	// The VM starts again: the node becomes Ready and loses the taint.
	n := get("down")
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "Ready node untainted", func() bool { return !hasOOS(get("down")) })
}
