package nodemanager

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// Reasons of the NetworkUnavailable condition: the one the node manager sets, and the one the
// route controller sets once the node's routes are in the route table.
const (
	ReasonWaitingForRoutes = "NodeInitialization"
	ReasonRouteCreated     = "RouteCreated"
)

// WaitForRoutes decides whether the node manager marks the node NetworkUnavailable=True so that
// no pod lands on it before its pod CIDR is routed. It does so while the node is being
// initialised (it still carries the uninitialized taint) or has no such condition yet, and never
// once the route controller has reported the route (False/RouteCreated): the route controller
// alone sets it back to False, after writing the route.
func WaitForRoutes(node *v1.Node, now metav1.Time) (v1.NodeCondition, bool) {
	var cur *v1.NodeCondition
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == v1.NodeNetworkUnavailable {
			cur = &node.Status.Conditions[i]
		}
	}
	want := v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionTrue, Reason: ReasonWaitingForRoutes,
		Message: "Waiting for the route controller to create the node's routes", LastTransitionTime: now, LastHeartbeatTime: now}
	switch {
	case cur == nil:
		return want, true
	case cur.Status == v1.ConditionTrue:
		return v1.NodeCondition{}, false
	case cur.Status == v1.ConditionFalse && cur.Reason == ReasonRouteCreated:
		return v1.NodeCondition{}, false
	case initialising(node):
		return want, true
	}
	return v1.NodeCondition{}, false
}

func initialising(node *v1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == nodes.TaintUninitialized {
			return true
		}
	}
	return false
}

// setCondition replaces the condition of its type (or adds it).
func setCondition(node *v1.Node, c v1.NodeCondition) {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == c.Type {
			node.Status.Conditions[i] = c
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, c)
}
