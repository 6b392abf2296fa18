// Package outofservice is the node-out-of-service controller: the existing Azure provider's
// node informer side effect that lets Kubernetes' non-graceful node shutdown handling move
// the pods (and detach the volumes) of a VM that was shut down. A NotReady node carrying the
// cloud shutdown taint (set by the cloud-node-lifecycle controller when InstanceShutdown is
// true) gets node.kubernetes.io/out-of-service:NoExecute; a Ready node loses it.
package outofservice

import (
	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// Change is what a node needs.
type Change int

// Changes.
const (
	None Change = iota
	AddTaint
	RemoveTaint
)

// Plan decides from the node alone: Ready → remove the out-of-service NoExecute taint if
// present; NotReady (or no Ready condition) with the shutdown taint and without the
// out-of-service one → add it.
func Plan(node *v1.Node) Change {
	oos := hasTaint(node, v1.TaintNodeOutOfService, v1.TaintEffectNoExecute)
	if ready(node) {
		if oos {
			return RemoveTaint
		}
		return None
	}
	if !oos && hasTaint(node, cloudproviderapi.TaintNodeShutdown, "") {
		return AddTaint
	}
	return None
}

func ready(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// hasTaint matches the key and, if effect is not empty, the effect.
func hasTaint(node *v1.Node, key string, effect v1.TaintEffect) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key && (effect == "" || t.Effect == effect) {
			return true
		}
	}
	return false
}
