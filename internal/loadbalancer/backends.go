package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/writer"
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

// Backends keeps the cluster's backend pools of a load balancer in step with the nodes.
type Backends interface {
	// Sync makes the cluster's pools of lb hold exactly the eligible nodes.
	Sync(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error
	// Detach empties the cluster's pools of lb (before the load balancer is deleted).
	Detach(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer) error
}

// nodeIPBackends writes node addresses through the backendAddressPools API (nodeIP pools): one
// PUT per changed pool, no VM or NIC call.
type nodeIPBackends struct {
	vnetID  string
	filter  NodeFilter
	pools   *writer.Registry[armnetwork.BackendAddressPool]
	onWrite func(lbID string)
	// hook edits the pool model last (the admin-state controller keeps draining nodes Down).
	hook func(pool *armnetwork.BackendAddressPool)
}

func (b *nodeIPBackends) Sync(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error {
	eligible := b.filter.Eligible(nodes)
	var errs []error
	for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
		name := naming.BackendPoolName(clusterName, fam)
		if findPool(lb, name) == nil {
			continue
		}
		want := map[string]string{} // address -> node name
		for _, n := range eligible {
			for i, a := range NodeAddresses(n, fam) {
				// Address names must be unique in the pool; the first address carries the
				// node name, as the existing provider writes it.
				if i == 0 {
					want[a.String()] = n.Name
				} else {
					want[a.String()] = fmt.Sprintf("%s-%d", n.Name, i)
				}
			}
		}
		if err := b.write(ctx, lb, name, want); err != nil {
			errs = append(errs, fmt.Errorf("backend pool %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (b *nodeIPBackends) Detach(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer) error {
	var errs []error
	for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
		name := naming.BackendPoolName(clusterName, fam)
		if p := findPool(lb, name); p != nil && p.Properties != nil && len(p.Properties.LoadBalancerBackendAddresses) > 0 {
			errs = append(errs, b.write(ctx, lb, name, map[string]string{}))
		}
	}
	return errors.Join(errs...)
}

// write sets the pool's addresses, keeping entries (and their other properties, such as an
// admin state) of addresses that stay.
func (b *nodeIPBackends) write(ctx context.Context, lb *armnetwork.LoadBalancer, pool string, want map[string]string) error {
	id := str(lb.ID) + "/backendAddressPools/" + pool
	w := b.pools.For(id)
	puts := w.Stats().Puts
	_, err := w.Submit(ctx, func(cur *armnetwork.BackendAddressPool) (*armnetwork.BackendAddressPool, error) {
		if cur == nil {
			return nil, fmt.Errorf("backend pool %s does not exist", id)
		}
		b.setAddresses(cur, want)
		return cur, nil
	})
	// Only a pool PUT changes the load balancer's ETag: keep its cache otherwise (node placement
	// with several load balancers skips its pass while every load balancer is cached).
	if err == nil && b.onWrite != nil && w.Stats().Puts != puts {
		b.onWrite(str(lb.ID))
	}
	return err
}

// setAddresses makes the pool's addresses want (address -> name), keeping the entries (and
// their other properties, such as an admin state) of addresses that stay, then runs the hook.
func (b *nodeIPBackends) setAddresses(pool *armnetwork.BackendAddressPool, want map[string]string) {
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	p := pool.Properties
	left := maps.Clone(want)
	p.LoadBalancerBackendAddresses = slices.DeleteFunc(p.LoadBalancerBackendAddresses, func(a *armnetwork.LoadBalancerBackendAddress) bool {
		if a.Properties == nil || a.Properties.IPAddress == nil {
			return true
		}
		if _, ok := left[*a.Properties.IPAddress]; ok {
			delete(left, *a.Properties.IPAddress)
			return false
		}
		return true
	})
	for _, ip := range sortedKeys(left) {
		p.LoadBalancerBackendAddresses = append(p.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(left[ip]),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:      to.Ptr(ip),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(b.vnetID)},
			},
		})
	}
	if len(p.LoadBalancerBackendAddresses) > 0 && p.VirtualNetwork == nil {
		p.VirtualNetwork = &armnetwork.SubResource{ID: to.Ptr(b.vnetID)}
	}
	if b.hook != nil {
		b.hook(pool)
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func findPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if strings.EqualFold(str(p.Name), name) {
			return p
		}
	}
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
