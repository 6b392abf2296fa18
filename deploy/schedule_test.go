package deploy

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// scheduleNode is a kwok node with the given OS, extra labels and taints.
func scheduleNode(name, os string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	n := framework.NewNode(framework.Machine{NodeName: name}, framework.NodeOptions{Initialized: true, Labels: labels})
	n.Labels[corev1.LabelOSStable] = os
	n.Spec.Taints = taints
	return n
}

// TestManifestsSchedule applies deploy/manifests for real to a cluster whose nodes are played
// by kwok, and checks the placement rules: the CCM's two replicas land on two different Linux
// nodes, including a control-plane node and a node still tainted uninitialized (the CCM must
// run before nodes are initialised), never on a node with a taint it does not tolerate; a third
// replica stays Pending (required anti-affinity); the node manager runs on every Linux node
// whatever its taints, and on the Windows node through its own DaemonSet; the
// PodDisruptionBudget allows one disruption.
func TestManifestsSchedule(t *testing.T) {
	e := framework.Start(t, framework.Options{NoAzure: true})
	// Runs before the environment's teardown (cleanups run last-in first-out).
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := exec.Command(e.Tools.Kubectl, "--kubeconfig", e.Kubeconfig, "-n", "kube-system", "get", "pods,daemonsets,deployments", "-o", "wide").CombinedOutput()
			t.Logf("kube-system:\n%s", b)
		}
	})
	ctx := context.Background()
	uninit := corev1.Taint{Key: framework.UninitializedTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	nodes := []*corev1.Node{
		scheduleNode("cp0", "linux", map[string]string{"node-role.kubernetes.io/control-plane": ""},
			corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}, uninit),
		scheduleNode("w1", "linux", nil, uninit),
		scheduleNode("w2", "linux", nil, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}),
		scheduleNode("win0", "windows", nil),
	}
	for _, n := range nodes {
		if _, err := e.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(e.Tools.Kubectl, "--kubeconfig", e.Kubeconfig, "apply", "-f",
		filepath.Join(framework.RepoRoot(), "deploy", "manifests")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}

	ccmPods := func(ctx context.Context) ([]corev1.Pod, error) {
		l, err := e.Kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=azure-cloud-controller-manager"})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	e.WaitFor("two CCM replicas running on cp0 and w1", func(ctx context.Context) (bool, error) {
		pods, err := ccmPods(ctx)
		if err != nil {
			return false, err
		}
		var on []string
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				on = append(on, p.Spec.NodeName)
			}
		}
		sort.Strings(on)
		if strings.Join(on, ",") != "cp0,w1" {
			return false, fmt.Errorf("running CCM pods on %v of %d, want cp0 and w1", on, len(pods))
		}
		return true, nil
	}, 2*time.Minute)

	e.WaitFor("node manager on every Linux node and on the Windows node", func(ctx context.Context) (bool, error) {
		for name, want := range map[string]int32{"azure-cloud-node-manager": 3, "azure-cloud-node-manager-windows": 1} {
			ds, err := e.Kube.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if ds.Status.DesiredNumberScheduled != want || ds.Status.NumberReady != want {
				return false, fmt.Errorf("%s: desired %d ready %d, want %d", name, ds.Status.DesiredNumberScheduled, ds.Status.NumberReady, want)
			}
		}
		return true, nil
	}, 2*time.Minute)

	e.WaitFor("PodDisruptionBudget allows one disruption", func(ctx context.Context) (bool, error) {
		pdb, err := e.Kube.PolicyV1().PodDisruptionBudgets("kube-system").Get(ctx, "azure-cloud-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pdb.Status.ExpectedPods == 2 && pdb.Status.DisruptionsAllowed == 1,
			fmt.Errorf("expected %d pods, %d disruptions allowed", pdb.Status.ExpectedPods, pdb.Status.DisruptionsAllowed)
	}, time.Minute)

	// A third replica has no node left: w2's taint is not tolerated, win0 is not Linux, and
	// cp0 and w1 already run one each.
	if _, err := e.Kube.AppsV1().Deployments("kube-system").Patch(ctx, "azure-cloud-controller-manager",
		types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("third replica unschedulable", func(ctx context.Context) (bool, error) {
		pods, err := ccmPods(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return true, nil
				}
			}
			if p.Spec.NodeName != "" && p.Spec.NodeName != "cp0" && p.Spec.NodeName != "w1" {
				return false, fmt.Errorf("a CCM replica was scheduled on %s", p.Spec.NodeName)
			}
		}
		return false, fmt.Errorf("no unschedulable CCM pod among %d", len(pods))
	}, time.Minute)
}
