// Package routes plans the cluster route table: the existing provider's route names and the
// edit of the table for node changes (Apply), as a mutation for the table's group-commit writer
// (Change), which puts every pending node change into one read-modify-write.
package routes

import (
	"net"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Separator between node name and CIDR in route names (the existing provider's).
const Separator = "____"

// Name is the route name of a node's pod CIDR: "<node>____<cidr without '.', ':' and '/'>",
// e.g. node-1____102440024 for 10.244.0.0/24. This is the existing provider's naming, kept so
// that a cluster switching over finds its routes instead of recreating them.
func Name(node, cidr string) string {
	r := strings.NewReplacer(".", "", ":", "", "/", "")
	return node + Separator + r.Replace(cidr)
}

// NodeOf returns the node name encoded in a route name (the whole name for legacy routes
// without separator).
func NodeOf(routeName string) string {
	if i := strings.Index(routeName, Separator); i >= 0 {
		return routeName[:i]
	}
	return routeName
}

// Op is one change to the route table.
type Op struct {
	// Delete removes the route; otherwise the route is created or replaced.
	Delete bool
	Node   string
	CIDR   string
	// Name overrides Name(Node, CIDR) (deletes of routes listed from the table).
	Name string
	// NextHop is the node's IP of the CIDR's family (creates only).
	NextHop string
}

func (o Op) routeName() string {
	if o.Name != "" {
		return o.Name
	}
	return Name(o.Node, o.CIDR)
}

func isIPv6CIDR(cidr string) bool {
	ip, _, err := net.ParseCIDR(cidr)
	return err == nil && ip.To4() == nil
}

// Apply applies ops, in order, to the current routes and returns the desired routes and
// whether anything changed. Creates replace a route of the same name and drop the node's other
// routes of the same IP family (a stale pod CIDR); deletes also drop the legacy route named
// just like the node. Routes of other nodes and foreign routes are kept untouched.
func Apply(current []*armnetwork.Route, ops []Op) ([]*armnetwork.Route, bool) {
	routes := map[string]*armnetwork.Route{}
	var order []string
	for _, r := range current {
		if r == nil || r.Name == nil {
			continue
		}
		routes[*r.Name] = r
		order = append(order, *r.Name)
	}
	changed := false
	for _, op := range ops {
		name := op.routeName()
		if op.Delete {
			for _, n := range []string{name, op.Node} {
				if _, ok := routes[n]; ok && n != "" {
					delete(routes, n)
					changed = true
				}
			}
			continue
		}
		v6 := isIPv6CIDR(op.CIDR)
		for n, r := range routes {
			if n != name && NodeOf(n) == op.Node && strings.Contains(n, Separator) && r.Properties != nil &&
				isIPv6CIDR(deref(r.Properties.AddressPrefix)) == v6 {
				delete(routes, n)
				changed = true
			}
		}
		want := &armnetwork.Route{Name: to.Ptr(name), Properties: &armnetwork.RoutePropertiesFormat{
			AddressPrefix:    to.Ptr(op.CIDR),
			NextHopType:      to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance),
			NextHopIPAddress: to.Ptr(op.NextHop),
		}}
		if old, ok := routes[name]; ok && sameRoute(old, want) {
			continue
		}
		if _, ok := routes[name]; !ok {
			order = append(order, name)
		}
		routes[name] = want
		changed = true
	}
	out := make([]*armnetwork.Route, 0, len(routes))
	seen := map[string]bool{}
	for _, n := range order {
		if r, ok := routes[n]; ok && !seen[n] {
			out = append(out, r)
			seen[n] = true
		}
	}
	return out, changed
}

func sameRoute(a, b *armnetwork.Route) bool {
	if a.Properties == nil || b.Properties == nil {
		return false
	}
	return deref(a.Properties.AddressPrefix) == deref(b.Properties.AddressPrefix) &&
		a.Properties.NextHopType != nil && *a.Properties.NextHopType == *b.Properties.NextHopType &&
		deref(a.Properties.NextHopIPAddress) == deref(b.Properties.NextHopIPAddress)
}

// Names returns the sorted route names (tests, logs).
func Names(rs []*armnetwork.Route) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, deref(r.Name))
	}
	sort.Strings(out)
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
