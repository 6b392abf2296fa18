package placement

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

func kubeNode(name, providerID string, labels map[string]string, addrs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: providerID}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: a})
	}
	return n
}

const ssPrefix = "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/"

func TestVMSetOf(t *testing.T) {
	for _, tc := range []struct {
		n    *v1.Node
		want string
	}{
		{kubeNode("a", ssPrefix+"pool0/virtualMachines/3", nil), "pool0"},
		{kubeNode("b", "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-b", map[string]string{LabelAgentPool: "agents"}), "agents"},
		{kubeNode("c", "", nil), ""},
		{kubeNode("d", ssPrefix+"pool1/virtualMachines/0", map[string]string{LabelAgentPool: "ignored"}), "pool1"},
	} {
		if got := VMSetOf(tc.n); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.n.Name, got, tc.want)
		}
	}
}

func TestNodeInputs(t *testing.T) {
	nodes := []*v1.Node{
		kubeNode("placed-before", ssPrefix+"pool0/virtualMachines/0", nil, "10.0.0.4"),
		kubeNode("in-a-pool", ssPrefix+"pool0/virtualMachines/1", nil, "10.0.0.5"),
		kubeNode("v6-in-b", ssPrefix+"pool0/virtualMachines/2", nil, "10.0.0.6", "fd00::6"),
		kubeNode("nowhere", ssPrefix+"pool0/virtualMachines/3", map[string]string{"x": "y"}, "10.0.0.7"),
		kubeNode("in-two-pools", ssPrefix+"pool0/virtualMachines/4", nil, "10.0.0.8"),
	}
	pools := []HeldPool{
		{Config: "a", Addresses: []string{"10.0.0.4", "10.0.0.5", "10.0.0.8"}},
		{Config: "b", Addresses: []string{"fd00::6", "10.0.0.8"}},
	}
	previous := map[string]string{"placed-before": "b"}
	got := NodeInputs(nodes, previous, pools, func(n *v1.Node) []string {
		var out []string
		for _, a := range n.Status.Addresses {
			out = append(out, a.Address)
		}
		return out
	})
	want := map[string]string{"placed-before": "b", "in-a-pool": "a", "v6-in-b": "b", "nowhere": "", "in-two-pools": "a"}
	if len(got) != len(nodes) {
		t.Fatalf("%d inputs for %d nodes", len(got), len(nodes))
	}
	for _, in := range got {
		if in.Current != want[in.Name] || in.VMSet != "pool0" {
			t.Errorf("%s: current %q (want %q), VM set %q", in.Name, in.Current, want[in.Name], in.VMSet)
		}
	}
	if got[3].Labels["x"] != "y" {
		t.Error("labels not carried")
	}
}

func TestNodeLabelKeys(t *testing.T) {
	cfgs, err := Compile([]config.MultipleStandardLoadBalancerConfiguration{
		{Name: "a", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "x"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpExists}}}},
		{Name: "b", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "y"}}},
		{Name: "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := NodeLabelKeys(cfgs); fmt.Sprint(got) != "[pool zone]" {
		t.Errorf("keys %v, want [pool zone]", got)
	}
}

func TestFingerprint(t *testing.T) {
	a := kubeNode("a", ssPrefix+"pool0/virtualMachines/0", map[string]string{"k": "1", "j": "2"}, "10.0.0.4")
	b := kubeNode("b", ssPrefix+"pool0/virtualMachines/1", nil, "10.0.0.5")
	lbs := []LBExists{{Name: "kubernetes", Exists: true}, {Name: "kubernetes-internal"}}
	keys := []string{"j", "k"}
	base := Fingerprint(lbs, NodesFingerprint([]*v1.Node{a, b}, keys))
	relabelled := a.DeepCopy()
	relabelled.Labels["k"] = "changed"
	otherLabel := a.DeepCopy()
	otherLabel.Labels["beta.kubernetes.io/arch"] = "amd64"
	readdressed := b.DeepCopy()
	readdressed.Status.Addresses[0].Address = "10.0.0.9"
	moved := b.DeepCopy()
	moved.Spec.ProviderID = ssPrefix + "pool1/virtualMachines/1"
	for _, tc := range []struct {
		name  string
		lbs   []LBExists
		nodes []*v1.Node
		same  bool
	}{
		{"same input", lbs, []*v1.Node{a, b}, true},
		{"node order", lbs, []*v1.Node{b, a}, true},
		{"a label changed", lbs, []*v1.Node{relabelled, b}, false},
		{"a label no node selector reads added", lbs, []*v1.Node{otherLabel, b}, true},
		{"an address changed", lbs, []*v1.Node{a, readdressed}, false},
		{"another VM set", lbs, []*v1.Node{a, moved}, false},
		{"a node less", lbs, []*v1.Node{a}, false},
		{"a load balancer created", []LBExists{{Name: "kubernetes", Exists: true}, {Name: "kubernetes-internal", Exists: true}}, []*v1.Node{a, b}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fingerprint(tc.lbs, NodesFingerprint(tc.nodes, keys)) == base; got != tc.same {
				t.Errorf("same fingerprint %v, want %v (%s)", got, tc.same, fmt.Sprint(tc.nodes))
			}
		})
	}
}
