package membership

import (
	"net/netip"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// Node labels that keep a node out of the load balancers.
const (
	LabelExcludeFromLB      = "node.kubernetes.io/exclude-from-external-load-balancers"
	LabelManaged            = "kubernetes.azure.com/managed"
	LabelResourceGroup      = "kubernetes.azure.com/resource-group"
	LabelRoleControlPlane   = "node-role.kubernetes.io/control-plane"
	LabelRoleMaster         = "node-role.kubernetes.io/master"
	LabelLegacyRole         = "kubernetes.io/role"
	legacyRoleMasterValue   = "master"
	LabelNodeExcludeBalance = "alpha.service-controller.kubernetes.io/exclude-balancer"
)

// NodeFilter decides which nodes belong in the backend pools.
type NodeFilter struct {
	// ExcludeControlPlane is excludeMasterFromStandardLB (always on for nodeIP pools).
	ExcludeControlPlane bool
	// ResourceGroup is the cluster's node resource group; nodes labelled with another one are
	// excluded (the existing provider does not pool cross-RG nodes).
	ResourceGroup string
}

// IsControlPlane reports the control-plane role labels.
func IsControlPlane(n *v1.Node) bool {
	_, cp := n.Labels[LabelRoleControlPlane]
	_, m := n.Labels[LabelRoleMaster]
	return cp || m || n.Labels[LabelLegacyRole] == legacyRoleMasterValue
}

// Excluded returns why a node is kept out of the pools ("" when it is eligible).
func (f NodeFilter) Excluded(n *v1.Node) string {
	switch {
	case n.DeletionTimestamp != nil:
		return "node is being deleted"
	case hasLabel(n, LabelExcludeFromLB) || hasLabel(n, LabelNodeExcludeBalance):
		return "labelled " + LabelExcludeFromLB
	case strings.EqualFold(n.Labels[LabelManaged], "false"):
		return "unmanaged node (" + LabelManaged + "=false)"
	case n.Labels[LabelResourceGroup] != "" && f.ResourceGroup != "" && !strings.EqualFold(n.Labels[LabelResourceGroup], f.ResourceGroup):
		return "node in another resource group"
	case f.ExcludeControlPlane && IsControlPlane(n):
		return "control-plane node (excludeMasterFromStandardLB)"
	}
	return ""
}

func hasLabel(n *v1.Node, k string) bool { _, ok := n.Labels[k]; return ok }

// Eligible filters nodes.
func (f NodeFilter) Eligible(nodes []*v1.Node) []*v1.Node {
	var out []*v1.Node
	for _, n := range nodes {
		if n != nil && f.Excluded(n) == "" {
			out = append(out, n)
		}
	}
	return out
}

// NodeAddresses are a node's InternalIPs of one family.
func NodeAddresses(n *v1.Node, fam naming.Family) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if (fam == naming.IPv6) == ip.Is6() {
			out = append(out, ip)
		}
	}
	return out
}

// toBeDeletedTaint is the cluster autoscaler's taint; the service controller leaves such nodes
// out of load balancers.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ServiceControllerNodes are the nodes the service controller passes to EnsureLoadBalancer (its "stable
// node set"): not being deleted, not labelled node.kubernetes.io/exclude-from-external-load-
// balancers (any value but a false boolean), not tainted for deletion by the cluster
// autoscaler. Whoever reconciles a service outside the service controller (the drift
// audit, the plan command) must use the same nodes, or it would fight the service controller
// over pool members.
func ServiceControllerNodes(nodes []*v1.Node) []*v1.Node {
	var out []*v1.Node
	for _, n := range nodes {
		if n.DeletionTimestamp != nil || excluded(n) || autoscalerDeleting(n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

func excluded(n *v1.Node) bool {
	v, ok := n.Labels[v1.LabelNodeExcludeBalancers]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

func autoscalerDeleting(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return true
		}
	}
	return false
}
