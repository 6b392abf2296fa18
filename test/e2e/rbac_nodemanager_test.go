package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestNodeManagerWritesOnlyItsOwnNode applies the chart's node-manager RBAC and
// ValidatingAdmissionPolicy to the real kube-apiserver and gives the node manager the token a
// kubelet would mount in its pod on node A (bound to the pod, so it names the node): the binary
// initialises node A, and the same token is denied updating node B, its status, its taints.
func TestNodeManagerWritesOnlyItsOwnNode(t *testing.T) {
	working(t)
	nodeManager := nodesRequireBinary(t, "azure-cloud-node-manager")
	e := framework.Start(t, framework.Options{})
	ctx := context.Background()
	if len(e.Machines) < 2 {
		t.Fatalf("need two machines, have %d", len(e.Machines))
	}
	a, b := e.Machines[0], e.Machines[1]
	nodesCreate(t, e, a, "", nil)
	nodesCreate(t, e, b, "", nil)
	rbacApply(t, e, rbacRender(t, "node-manager-rbac.yaml"))

	// The node manager's pod on node A, and the token the kubelet would project into it.
	pod, err := e.Kube.CoreV1().Pods(rbacNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "azure-cloud-node-manager-" + a.NodeName},
		Spec: corev1.PodSpec{NodeName: a.NodeName, ServiceAccountName: rbacNodeMgrSA,
			Containers: []corev1.Container{{Name: "cloud-node-manager", Image: "azure-cloud-node-manager"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := e.Kube.CoreV1().ServiceAccounts(rbacNamespace).CreateToken(ctx, rbacNodeMgrSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := rbacKubeconfig(t, e, "node-manager-"+a.NodeName, tr.Status.Token)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	// The policy takes effect a moment after it is applied (the API server loads it from its
	// informer): probe with dry-run updates, which admission judges but which change nothing, so
	// a probe allowed before the policy loaded leaves node B as it was.
	e.WaitFor("the policy is in force (node B cannot be labelled)", func(ctx context.Context) (bool, error) {
		err := nodeManagerLabel(ctx, kube, b.NodeName, metav1.DryRunAll)
		if err == nil {
			return false, fmt.Errorf("a dry-run update of node %s was allowed", b.NodeName)
		}
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), err
	}, time.Minute)

	// Before initialisation node A has no providerID and the uninitialized taint: what the node
	// manager writes then is allowed (dry-run, so the binary below still finds work to do).
	t.Run("on its own node, what it writes is allowed", func(t *testing.T) {
		for what, edit := range map[string]func(n *corev1.Node){
			"set its cloud labels": func(n *corev1.Node) {
				n.Labels[corev1.LabelTopologyZone], n.Labels["topology.kubernetes.azure.com/sub-fault-domain"] = "westus-1", "2"
			},
			"set an empty providerID": func(n *corev1.Node) { n.Spec.ProviderID = a.ProviderID },
			"remove the uninitialized taint": func(n *corev1.Node) {
				n.Spec.Taints = dropTaint(framework.UninitializedTaintKey)(n.Spec.Taints)
			},
		} {
			if err := nodeManagerDryRun(ctx, kube, a.NodeName, false, edit); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		for what, edit := range map[string]func(n *corev1.Node){
			"set the addresses": func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: a.InternalIPs[0]}, {Type: corev1.NodeHostName, Address: a.NodeName}}
			},
			"set NetworkUnavailable": func(n *corev1.Node) {
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue,
					Reason: "NoRouteCreated", LastTransitionTime: metav1.Now()})
			},
		} {
			if err := nodeManagerDryRun(ctx, kube, a.NodeName, true, edit); err != nil {
				t.Errorf("%s (status): %v", what, err)
			}
		}
	})

	t.Run("initialises its own node", func(t *testing.T) {
		e.Azure.Server.IMDS().SetDefaultVM(a.NodeName)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(cctx, nodeManager, "--kubeconfig="+kubeconfig, "--node-name="+a.NodeName,
			"--imds-endpoint="+e.Azure.IMDSURL, "--once").CombinedOutput()
		if err != nil {
			t.Fatalf("node manager on its own node: %v\n%s", err, out)
		}
		e.WaitFor("node manager initialised "+a.NodeName, nodesInitialized(e, a), 30*time.Second)
	})

	// After initialisation: everything else a stolen token could change on its own Node.
	t.Run("on its own node, nothing else", func(t *testing.T) {
		spec := map[string]struct {
			edit func(n *corev1.Node)
			want string
		}{
			"a node-restriction label": {func(n *corev1.Node) { n.Labels["node-restriction.kubernetes.io/secure"] = "true" }, "node-restriction.kubernetes.io/secure"},
			"remove a label":           {func(n *corev1.Node) { delete(n.Labels, "type") }, "not type"},
			"an annotation":            {func(n *corev1.Node) { n.Annotations[framework.ProvidedNodeIPAnno] = "203.0.113.66" }, "annotations"},
			"add a taint": {func(n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "azure-ccm-test/hijacked", Effect: corev1.TaintEffectNoSchedule})
			}, "taint"},
			"change the providerID": {func(n *corev1.Node) { n.Spec.ProviderID += "x" }, "providerID"},
			"set a pod CIDR":        {func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"} }, "pod CIDRs"},
			"cordon":                {func(n *corev1.Node) { n.Spec.Unschedulable = true }, "schedulability"},
		}
		status := map[string]struct {
			edit func(n *corev1.Node)
			want string
		}{
			"a node-restriction label": {func(n *corev1.Node) { n.Labels["node-restriction.kubernetes.io/secure"] = "true" }, "node-restriction.kubernetes.io/secure"},
			"mark it NotReady": {func(n *corev1.Node) {
				for i := range n.Status.Conditions {
					if n.Status.Conditions[i].Type == corev1.NodeReady {
						n.Status.Conditions[i].Status = corev1.ConditionFalse
					}
				}
			}, "NetworkUnavailable"},
			"raise its capacity": {func(n *corev1.Node) {
				n.Status.Capacity[corev1.ResourcePods], n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("5000"), resource.MustParse("5000")
			}, "capacity"},
		}
		check := func(what string, onStatus bool, edit func(n *corev1.Node), want string) {
			err := nodeManagerDryRun(ctx, kube, a.NodeName, onStatus, edit)
			if err == nil {
				t.Errorf("%s on its own node %s was allowed", what, a.NodeName)
				return
			}
			// The API server itself refuses a change of a set providerID, before admission.
			refused := apierrors.IsForbidden(err) && strings.Contains(err.Error(), "azure-cloud-node-manager may") ||
				apierrors.IsInvalid(err) && what == "change the providerID"
			if !refused || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: want the policy's denial naming %q, got %v", what, want, err)
			}
			t.Logf("%s: %v", what, err)
		}
		for what, c := range spec {
			check(what, false, c.edit, c.want)
		}
		for what, c := range status {
			check(what+" (status)", true, c.edit, c.want)
		}
	})

	t.Run("denied on another node", func(t *testing.T) {
		n, err := kube.CoreV1().Nodes().Get(ctx, b.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading node B is allowed by RBAC: %v", err)
		}
		attempts := map[string]func() error{
			"label": func() error { return nodeManagerLabel(ctx, kube, b.NodeName) },
			"remove the uninitialized taint": func() error {
				c := n.DeepCopy()
				c.Spec.Taints = nil
				_, err := kube.CoreV1().Nodes().Update(ctx, c, metav1.UpdateOptions{})
				return err
			},
			"spoof the addresses (status)": func() error {
				c := n.DeepCopy()
				c.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "203.0.113.66"}}
				_, err := kube.CoreV1().Nodes().UpdateStatus(ctx, c, metav1.UpdateOptions{})
				return err
			},
		}
		for what, try := range attempts {
			err := try()
			if err == nil {
				t.Errorf("%s of node %s with node %s's token was allowed", what, b.NodeName, a.NodeName)
				continue
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "azure-cloud-node-manager may only write its own Node") ||
				!strings.Contains(err.Error(), a.NodeName) {
				t.Errorf("%s: want the policy's denial naming %s, got %v", what, a.NodeName, err)
			}
			t.Logf("%s: %v", what, err)
		}
		after, err := e.Kube.CoreV1().Nodes().Get(ctx, b.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !nodesHasTaint(after, framework.UninitializedTaintKey) || after.Labels["azure-ccm-test/hijacked"] != "" {
			t.Errorf("node %s was changed: %v %v", b.NodeName, after.Spec.Taints, after.Labels)
		}
		for _, addr := range after.Status.Addresses {
			if addr.Address == "203.0.113.66" {
				t.Errorf("node %s's addresses were spoofed: %v", b.NodeName, after.Status.Addresses)
			}
		}
	})

	t.Run("a token not bound to a pod writes no node", func(t *testing.T) {
		unbound := rbacToken(t, e, rbacNodeMgrSA)
		cfg, err := clientcmd.BuildConfigFromFlags("", rbacKubeconfig(t, e, "node-manager-unbound", unbound))
		if err != nil {
			t.Fatal(err)
		}
		err = nodeManagerLabel(ctx, kubernetes.NewForConfigOrDie(cfg), a.NodeName)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "<none>") {
			t.Errorf("want the policy's denial for a token without node, got %v", err)
		}
	})
}

// nodeManagerLabel tries to add a label to the node (dryRun: metav1.DryRunAll, or none).
func nodeManagerLabel(ctx context.Context, kube kubernetes.Interface, node string, dryRun ...string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["azure-ccm-test/hijacked"] = "true"
	_, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{DryRun: dryRun})
	return err
}

// nodeManagerDryRun reads the node, applies edit and sends it as a dry-run update of the Node
// (or of its status): admission judges it, nothing changes.
func nodeManagerDryRun(ctx context.Context, kube kubernetes.Interface, node string, onStatus bool, edit func(*corev1.Node)) error {
	// kwok updates the node too: a conflict is no verdict, read again.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		edit(n)
		opts := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
		if onStatus {
			_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, opts)
		} else {
			_, err = kube.CoreV1().Nodes().Update(ctx, n, opts)
		}
		return err
	})
}
