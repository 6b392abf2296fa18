package multislb

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
)

func viewNode(name, rv string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0." + rv}}}}
}

func TestNodeViews(t *testing.T) {
	v := newNodeViews(membership.NodeFilter{ExcludeControlPlane: true}, []string{"x"})
	a, b := viewNode("a", "1", nil), viewNode("b", "2", nil)
	cp := viewNode("cp", "3", map[string]string{membership.LabelRoleControlPlane: ""})
	first := v.of([]*v1.Node{a, b, cp})
	if len(first.eligible) != 2 {
		t.Fatalf("eligible %d nodes, want 2 (the control plane left out)", len(first.eligible))
	}
	if got := v.of([]*v1.Node{cp, b, a}); got != first {
		t.Error("the same objects in another order were filtered and hashed again")
	}
	// A node's new object (new resource version) is a new list, even with equal content.
	b2 := viewNode("b", "4", map[string]string{"x": "y"})
	second := v.of([]*v1.Node{a, b2, cp})
	if second == first || second.fp == first.fp {
		t.Error("a changed node did not change the view")
	}
	if got := v.of([]*v1.Node{a, cp}); got == second || len(got.eligible) != 1 {
		t.Errorf("a node less: view %+v", got)
	}
	// Objects without resource versions are never taken from memory: their content decides.
	h1 := viewNode("h", "", nil)
	h2 := viewNode("h", "", map[string]string{"x": "y"})
	if x, y := v.of([]*v1.Node{h1}), v.of([]*v1.Node{h2}); x == y || x.fp == y.fp {
		t.Error("hand-built nodes with different labels gave one view")
	}
}
