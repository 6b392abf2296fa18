package routes

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestReconcile(t *testing.T) {
	cluster := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.128.0/17"), netip.MustParsePrefix("fd00::/56")}
	route := func(node, cidr string) Route { return Route{Name: Name(node, cidr), Node: node, CIDR: cidr} }
	for _, c := range []struct {
		name        string
		nodes       []NodeCIDRs
		current     []Route
		create, del []Route
	}{
		{name: "in step",
			nodes:   []NodeCIDRs{{Name: "n1", PodCIDRs: []string{"10.244.1.0/24"}}},
			current: []Route{route("n1", "10.244.1.0/24")}},
		{name: "new node, and a node without pod CIDR yet",
			nodes:  []NodeCIDRs{{Name: "n1", PodCIDRs: []string{"10.244.1.0/24", "fd00::100/120"}}, {Name: "n2"}},
			create: []Route{route("n1", "10.244.1.0/24"), route("n1", "fd00::100/120")}},
		{name: "node gone; a route outside the cluster CIDRs is not ours",
			current: []Route{route("n1", "10.244.1.0/24"), route("vpn", "192.168.0.0/24")},
			del:     []Route{route("n1", "10.244.1.0/24")}},
		{name: "CIDR changed: the old route goes, the new one comes",
			nodes:   []NodeCIDRs{{Name: "n1", PodCIDRs: []string{"10.244.2.0/24"}}},
			current: []Route{route("n1", "10.244.1.0/24")},
			create:  []Route{route("n1", "10.244.2.0/24")},
			del:     []Route{route("n1", "10.244.1.0/24")}},
		{name: "a route that ends inside the cluster CIDR is ours",
			current: []Route{route("x", "10.245.0.0/16")},
			del:     []Route{route("x", "10.245.0.0/16")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			create, del := Reconcile(c.nodes, c.current, cluster)
			if !reflect.DeepEqual(create, c.create) || !reflect.DeepEqual(del, c.del) {
				t.Errorf("Reconcile = create %v, delete %v; want %v, %v", create, del, c.create, c.del)
			}
		})
	}
}
