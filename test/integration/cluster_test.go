// Package integration checks the local test cluster itself: a real control plane whose nodes
// and pods KWOK simulates.
package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestPodRunsOnSimulatedNode registers a node for a VM seeded in azsim, the way a kubelet
// would, schedules a pod and waits for it to be Running on that node.
func TestPodRunsOnSimulatedNode(t *testing.T) {
	env := framework.Start(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if len(env.Machines) == 0 {
		t.Fatal("azsim seeded no machines")
	}
	// azsim keeps serving after Start returned, with the seeded estate.
	vnets, err := env.Azsim.List(ctx, "Microsoft.Network/virtualNetworks")
	if err != nil || len(vnets) != 1 {
		t.Fatalf("azsim lists %d VNets (err %v), want the default topology's one", len(vnets), err)
	}
	m := env.Machines[0]
	if len(m.InternalIPs) == 0 || m.ProviderID == "" {
		t.Fatalf("seeded machine lacks an IP or providerID: %+v", m)
	}
	// No CCM runs here, so the node is created already initialized (no uninitialized taint).
	env.CreateNodes(framework.NodeOptions{Initialized: true, ProviderID: true}, m)
	env.WaitFor(m.NodeName+" Ready", env.NodeReady(m.NodeName), time.Minute)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	env.WaitFor("service account default/default", env.DefaultServiceAccount("default"), time.Minute)
	if _, err := env.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor("pod web Running", env.PodRunning("default", "web"), time.Minute)

	got, err := env.Kube.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != m.NodeName {
		t.Errorf("pod scheduled on %q, want %s", got.Spec.NodeName, m.NodeName)
	}
	if got.Status.PodIP == "" {
		t.Error("kwok gave the pod no IP")
	}

	// kwok-controller plays every pod through its watches. A watch the apiserver refuses
	// leaves it seeing pods only when it re-lists, after a back-off that grows to a minute:
	// pods then come up late at random, and tests waiting for them time out under load.
	log, err := os.ReadFile(filepath.Join(env.Cluster.Dir(), "logs", "kwok-controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "watch ended with error") {
			t.Errorf("kwok-controller's watches fail, so it sees pods late; e.g.:\n%s", l)
			break
		}
	}
}
