package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Node labels, annotations and taints a kubelet (and KWOK) use.
const (
	KwokNodeAnnotation    = "kwok.x-k8s.io/node"
	ProvidedNodeIPAnno    = "alpha.kubernetes.io/provided-node-ip"
	UninitializedTaintKey = "node.cloudprovider.kubernetes.io/uninitialized"
)

// NodeOptions say which kubelet a simulated node imitates.
type NodeOptions struct {
	// ProviderID sets spec.providerID, as a kubelet started with --provider-id does. Without
	// it the CCM has to find the VM by node name.
	ProviderID bool
	// Initialized leaves out the node.cloudprovider.kubernetes.io/uninitialized taint that a
	// kubelet with --cloud-provider=external adds; use it for tests that run without a CCM.
	Initialized bool
	// NodeIP sets the alpha.kubernetes.io/provided-node-ip annotation (kubelet --node-ip).
	NodeIP bool
	// Labels are added to the kubelet's own labels.
	Labels map[string]string
}

// Machine is a VM or scale-set instance seeded into azsim, as a node would represent it.
type Machine = topology.Machine

// NewNode is the Node object a kubelet with --cloud-provider=external would register for m:
// no zone, instance-type or region labels (those are the CCM's job), addresses from the NIC,
// and the KWOK annotation so that kwok-controller plays the kubelet.
func NewNode(m Machine, o NodeOptions) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": m.NodeName,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range o.Labels {
		labels[k] = v
	}
	annotations := map[string]string{
		KwokNodeAnnotation:             "fake",
		"node.alpha.kubernetes.io/ttl": "0",
	}
	if o.NodeIP && len(m.InternalIPs) > 0 {
		annotations[ProvidedNodeIPAnno] = m.InternalIPs[0]
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: labels, Annotations: annotations},
	}
	if o.ProviderID {
		n.Spec.ProviderID = m.ProviderID
	}
	if !o.Initialized {
		n.Spec.Taints = []corev1.Taint{{Key: UninitializedTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	for _, ip := range m.InternalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: m.NodeName})
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
	return n
}

// CreateNodes registers one node per machine.
func CreateNodes(ctx context.Context, kube kubernetes.Interface, o NodeOptions, machines ...Machine) ([]*corev1.Node, error) {
	out := make([]*corev1.Node, 0, len(machines))
	for _, m := range machines {
		n, err := kube.CoreV1().Nodes().Create(ctx, NewNode(m, o), metav1.CreateOptions{})
		if err != nil {
			return out, fmt.Errorf("create node %s: %w", m.NodeName, err)
		}
		out = append(out, n)
	}
	return out, nil
}
