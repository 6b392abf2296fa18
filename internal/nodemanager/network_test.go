package nodemanager

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

func TestWaitForRoutes(t *testing.T) {
	tainted := []v1.Taint{{Key: nodes.TaintUninitialized, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	cond := func(status v1.ConditionStatus, reason string) []v1.NodeCondition {
		return []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}, {Type: v1.NodeNetworkUnavailable, Status: status, Reason: reason}}
	}
	for _, tc := range []struct {
		name       string
		taints     []v1.Taint
		conditions []v1.NodeCondition
		want       bool
	}{
		{"new node without the condition", tainted, nil, true},
		{"initialised node without the condition", nil, nil, true},
		{"already waiting", tainted, cond(v1.ConditionTrue, ReasonWaitingForRoutes), false},
		{"route controller found no route", tainted, cond(v1.ConditionTrue, "NoRouteCreated"), false},
		{"route already created", tainted, cond(v1.ConditionFalse, ReasonRouteCreated), false},
		{"False set by someone else while initialising", tainted, cond(v1.ConditionFalse, "CalicoIsUp"), true},
		{"False set by someone else after initialisation", nil, cond(v1.ConditionFalse, "CalicoIsUp"), false},
	} {
		n := &v1.Node{Spec: v1.NodeSpec{Taints: tc.taints}, Status: v1.NodeStatus{Conditions: tc.conditions}}
		c, ok := WaitForRoutes(n, metav1.Now())
		if ok != tc.want {
			t.Errorf("%s: set=%v, want %v", tc.name, ok, tc.want)
			continue
		}
		if ok && (c.Type != v1.NodeNetworkUnavailable || c.Status != v1.ConditionTrue || c.Reason != ReasonWaitingForRoutes) {
			t.Errorf("%s: condition %+v", tc.name, c)
		}
	}
}

func TestSetCondition(t *testing.T) {
	n := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	setCondition(n, v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionTrue})
	setCondition(n, v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse})
	if len(n.Status.Conditions) != 2 || n.Status.Conditions[1].Status != v1.ConditionFalse || n.Status.Conditions[0].Type != v1.NodeReady {
		t.Fatalf("conditions %+v", n.Status.Conditions)
	}
}
