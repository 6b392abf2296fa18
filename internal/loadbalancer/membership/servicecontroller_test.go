package membership

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func scnNode(name string, mod ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, m := range mod {
		m(n)
	}
	return n
}

func TestServiceControllerNodes(t *testing.T) {
	now := metav1.Now()
	label := func(v string) func(*v1.Node) {
		return func(n *v1.Node) { n.Labels[v1.LabelNodeExcludeBalancers] = v }
	}
	nodes := []*v1.Node{
		scnNode("ok"),
		scnNode("deleting", func(n *v1.Node) { n.DeletionTimestamp = &now }),
		scnNode("excluded", label("true")),
		scnNode("exclusion-false", label("false")),
		scnNode("exclusion-garbage", label("maybe")),
		scnNode("autoscaler", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: toBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}
		}),
		scnNode("other-taint", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "x", Effect: v1.TaintEffectNoSchedule}} }),
		scnNode("not-ready", func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		}),
	}
	var got []string
	for _, n := range ServiceControllerNodes(nodes) {
		got = append(got, n.Name)
	}
	if want := "ok exclusion-false other-taint not-ready"; strings.Join(got, " ") != want {
		t.Errorf("ServiceControllerNodes = %v, want %s", got, want)
	}
}
