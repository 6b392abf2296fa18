package nodes

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Node labels of the cross-resource-group and on-prem node feature.
const (
	// LabelResourceGroup names the resource group of a node's VM when it is not the
	// configured resourceGroup.
	LabelResourceGroup = "kubernetes.azure.com/resource-group"
	// LabelManaged = "false" marks a node that is not an Azure VM (on-prem).
	LabelManaged = "kubernetes.azure.com/managed"
	// LabelExcludeBalancerAlpha = "true" keeps a node out of load balancers (legacy label).
	LabelExcludeBalancerAlpha = "alpha.service-controller.kubernetes.io/exclude-balancer"
)

// IsUnmanaged reports an on-prem node (label kubernetes.azure.com/managed=false, any case),
// or a node whose providerID is set but is not an Azure resource ID.
func IsUnmanaged(node *v1.Node) bool {
	if node == nil {
		return false
	}
	if strings.EqualFold(node.Labels[LabelManaged], "false") {
		return true
	}
	if node.Spec.ProviderID != "" {
		p, err := ParseProviderID(node.Spec.ProviderID)
		return err != nil || p.Kind == KindUnmanaged
	}
	return false
}

// ResourceGroupOf returns the resource group of a node's VM: its label, else def. Lower case.
func ResourceGroupOf(node *v1.Node, def string) string {
	if node != nil {
		if rg := node.Labels[LabelResourceGroup]; rg != "" {
			return strings.ToLower(rg)
		}
	}
	return strings.ToLower(def)
}

// ExclusionReason says why a node is kept out of load balancers ("" if it is not).
// clusterRG is the configured resourceGroup.
func ExclusionReason(node *v1.Node, clusterRG string) string {
	if node == nil {
		return "node unknown"
	}
	switch {
	case IsUnmanaged(node):
		return "on-prem node (" + LabelManaged + "=false)"
	case node.Labels[LabelResourceGroup] != "" && !strings.EqualFold(node.Labels[LabelResourceGroup], clusterRG):
		return "node in another resource group (" + LabelResourceGroup + "=" + node.Labels[LabelResourceGroup] + ")"
	}
	if _, ok := node.Labels[v1.LabelNodeExcludeBalancers]; ok {
		return "label " + v1.LabelNodeExcludeBalancers
	}
	if strings.EqualFold(node.Labels[LabelExcludeBalancerAlpha], "true") {
		return "label " + LabelExcludeBalancerAlpha + "=true"
	}
	return ""
}

// IsExcludedFromLB reports whether a node must not be in any load balancer backend pool.
func IsExcludedFromLB(node *v1.Node, clusterRG string) bool {
	return ExclusionReason(node, clusterRG) != ""
}
