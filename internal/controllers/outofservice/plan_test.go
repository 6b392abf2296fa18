package outofservice

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func node(ready v1.ConditionStatus, taints ...v1.Taint) *v1.Node {
	n := &v1.Node{Spec: v1.NodeSpec{Taints: taints}}
	if ready != "" {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}}
	}
	return n
}

func TestPlan(t *testing.T) {
	shutdown := v1.Taint{Key: "node.cloudprovider.kubernetes.io/shutdown", Effect: v1.TaintEffectNoSchedule}
	oos := v1.Taint{Key: "node.kubernetes.io/out-of-service", Effect: v1.TaintEffectNoExecute}
	oosNoSchedule := v1.Taint{Key: "node.kubernetes.io/out-of-service", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		node *v1.Node
		want Change
	}{
		{"NotReady and shut down", node(v1.ConditionFalse, shutdown), AddTaint},
		{"Unknown and shut down", node(v1.ConditionUnknown, shutdown), AddTaint},
		{"no Ready condition and shut down", node("", shutdown), AddTaint},
		{"already out of service", node(v1.ConditionFalse, shutdown, oos), None},
		{"NotReady, not shut down", node(v1.ConditionFalse), None},
		{"Ready and shut down taint (not yet removed)", node(v1.ConditionTrue, shutdown), None},
		{"Ready and out of service", node(v1.ConditionTrue, oos), RemoveTaint},
		{"Ready, out-of-service with another effect", node(v1.ConditionTrue, oosNoSchedule), None},
		{"NotReady, out-of-service with another effect", node(v1.ConditionFalse, shutdown, oosNoSchedule), AddTaint},
		{"Ready", node(v1.ConditionTrue), None},
	} {
		if got := Plan(tc.node); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
