package membership

import (
	"fmt"
	"maps"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// IP-based (nodeIP) pools hold node addresses, not ip configurations: the planners below give
// the entries a pool must hold and the edit of a pool model that gets it there.

// AddressEntries are the entries an IP-based pool of family fam holds for nodes, address →
// entry name. Entry names must be unique in a pool: a node's first address is named after the
// node and its others <node>-<i>, as the existing provider names them.
func AddressEntries(nodes []*v1.Node, fam naming.Family) map[string]string {
	want := map[string]string{}
	for _, n := range nodes {
		for i, a := range NodeAddresses(n, fam) {
			if i == 0 {
				want[a.String()] = n.Name
			} else {
				want[a.String()] = fmt.Sprintf("%s-%d", n.Name, i)
			}
		}
	}
	return want
}

// LocalPoolEntries are the entries of the dedicated pool of an externalTrafficPolicy: Local
// service: the eligible nodes that host a ready endpoint of it. While the endpoints are not
// known (known=false: informers not synced) every eligible node is in, so a restart never
// empties a pool.
func LocalPoolEntries(eligible []*v1.Node, hosts []string, known bool, fam naming.Family) map[string]string {
	if !known {
		return AddressEntries(eligible, fam)
	}
	var in []*v1.Node
	for _, n := range eligible {
		if slices.Contains(hosts, n.Name) {
			in = append(in, n)
		}
	}
	return AddressEntries(in, fam)
}

// SameAddresses reports whether pool holds exactly the addresses of want.
func SameAddresses(pool *armnetwork.BackendAddressPool, want map[string]string) bool {
	have := map[string]bool{}
	if pool.Properties != nil {
		for _, a := range pool.Properties.LoadBalancerBackendAddresses {
			if a.Properties == nil || a.Properties.IPAddress == nil {
				return false
			}
			have[*a.Properties.IPAddress] = true
		}
	}
	if len(have) != len(want) {
		return false
	}
	for ip := range want {
		if !have[ip] {
			return false
		}
	}
	return true
}

// SetAddresses makes pool hold the addresses of want (address → entry name) in the virtual
// network vnetID, keeping the entries of addresses that stay as they are (with their other
// properties, such as an admin state) and adding new ones in address order. It reports whether
// it removed or added an entry.
func SetAddresses(pool *armnetwork.BackendAddressPool, want map[string]string, vnetID string) (changed bool) {
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	p := pool.Properties
	left := maps.Clone(want)
	p.LoadBalancerBackendAddresses = slices.DeleteFunc(p.LoadBalancerBackendAddresses, func(a *armnetwork.LoadBalancerBackendAddress) bool {
		if a.Properties == nil || a.Properties.IPAddress == nil {
			changed = true
			return true
		}
		if _, ok := left[*a.Properties.IPAddress]; ok {
			delete(left, *a.Properties.IPAddress)
			return false
		}
		changed = true
		return true
	})
	for _, ip := range slices.Sorted(maps.Keys(left)) {
		changed = true
		p.LoadBalancerBackendAddresses = append(p.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(left[ip]),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:      to.Ptr(ip),
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)},
			},
		})
	}
	if len(p.LoadBalancerBackendAddresses) > 0 && p.VirtualNetwork == nil {
		p.VirtualNetwork = &armnetwork.SubResource{ID: to.Ptr(vnetID)}
	}
	return changed
}
