package routes

import (
	"net/netip"
	"sort"
)

// NodeCIDRs is a node as the route controller sees it: its pod CIDRs.
type NodeCIDRs struct {
	Name     string
	PodCIDRs []string
}

// Route is a route of the table as ListRoutes reports it.
type Route struct {
	Name, Node, CIDR string
}

// Reconcile is the decision of the standard route controller (k8s.io/cloud-provider), for a
// caller that must predict its writes without running it: a route for every pod CIDR of every
// node that has none with that CIDR (creates), and the deletion of every route within the
// cluster CIDRs whose node is unknown or no longer has that pod CIDR. Routes outside the
// cluster CIDRs are not the controller's.
func Reconcile(nodes []NodeCIDRs, current []Route, clusterCIDRs []netip.Prefix) (create, del []Route) {
	have := map[[2]string]bool{}
	for _, r := range current {
		have[[2]string{r.Node, r.CIDR}] = true
	}
	want := map[[2]string]bool{}
	for _, n := range nodes {
		for _, c := range n.PodCIDRs {
			k := [2]string{n.Name, c}
			want[k] = true
			if !have[k] {
				create = append(create, Route{Name: Name(n.Name, c), Node: n.Name, CIDR: c})
			}
		}
	}
	for _, r := range current {
		if responsible(r.CIDR, clusterCIDRs) && !want[[2]string{r.Node, r.CIDR}] {
			del = append(del, r)
		}
	}
	sort.Slice(create, func(i, j int) bool { return create[i].Name < create[j].Name })
	sort.Slice(del, func(i, j int) bool { return del[i].Name < del[j].Name })
	return create, del
}

// responsible: the route's CIDR starts or ends inside a cluster CIDR (the route controller's
// test).
func responsible(cidr string, clusterCIDRs []netip.Prefix) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false
	}
	p = p.Masked()
	first, last := p.Addr(), lastAddr(p)
	for _, c := range clusterCIDRs {
		if c.Contains(first) || c.Contains(last) {
			return true
		}
	}
	return false
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
