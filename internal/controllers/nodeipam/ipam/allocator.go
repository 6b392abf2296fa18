package ipam

import (
	"fmt"
	"net/netip"
	"strings"
)

// Node is what the allocator needs of a Node object.
type Node struct {
	Name string
	// UID tells a Node from an earlier one of the same name.
	UID string
	// PodCIDRs is spec.podCIDRs (spec.podCIDR when the list is empty).
	PodCIDRs []string
}

// Conflict is a pod CIDR of a node that another node (or the service range) also holds.
type Conflict struct {
	CIDR string
	// Holders are the other nodes; "" stands for the service CIDR.
	Holders []string
}

// Observation is what the allocator learnt from a Node.
type Observation struct {
	// NeedsCIDRs: the node has no pod CIDR yet.
	NeedsCIDRs bool
	// Changed: the node's claims were recorded or replaced (false for a Node seen before).
	Changed bool
	// Conflicts lists pod CIDRs held by someone else too (only when Changed).
	Conflicts []Conflict
	// Unusable lists pod CIDRs that are not CIDRs, outside every cluster CIDR, or of a family
	// without a cluster CIDR (only when Changed). They are not recorded.
	Unusable []string
}

// record is what a node holds. pending: chosen for the node but not yet seen on it.
type record struct {
	uid     string
	cidrs   []netip.Prefix
	pending bool
}

// Allocator keeps one pool per cluster CIDR (at most one per IP family) and what each node
// holds. It is not safe for concurrent use.
type Allocator struct {
	pools []*Pool
	nodes map[string]*record
}

// Spec describes one pool: a cluster CIDR, the node subnet mask and ranges to keep out.
type Spec struct {
	Cluster  netip.Prefix
	NodeBits int
	// Reserved ranges (the service CIDR when it overlaps the cluster CIDR).
	Reserved []netip.Prefix
}

// NewAllocator builds the pools, primary family first.
func NewAllocator(specs []Spec) (*Allocator, error) {
	if len(specs) == 0 || len(specs) > 2 {
		return nil, fmt.Errorf("want one or two cluster CIDRs, got %d", len(specs))
	}
	a := &Allocator{nodes: map[string]*record{}}
	for _, s := range specs {
		p, err := NewPool(s.Cluster, s.NodeBits)
		if err != nil {
			return nil, err
		}
		for _, other := range a.pools {
			if other.IsIPv6() == p.IsIPv6() {
				return nil, fmt.Errorf("cluster CIDRs %s and %s are of the same IP family", other.Cluster(), p.Cluster())
			}
		}
		for _, r := range s.Reserved {
			p.Reserve(r)
		}
		a.pools = append(a.pools, p)
	}
	return a, nil
}

// Pools returns the pools (read only: usage figures).
func (a *Allocator) Pools() []*Pool { return a.pools }

// poolFor is the pool of c's family.
func (a *Allocator) poolFor(c netip.Prefix) *Pool {
	for _, p := range a.pools {
		if p.cluster.Addr().BitLen() == c.Addr().BitLen() {
			return p
		}
	}
	return nil
}

func parseCIDR(s string) (netip.Prefix, error) {
	c, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(c.Addr().Unmap(), c.Bits()-(c.Addr().BitLen()-c.Addr().Unmap().BitLen())).Masked(), nil
}

// Observe records the pod CIDRs a Node carries. A node seen for the first time (or recreated
// under the same name, or whose CIDRs differ from what it held) has its claims recorded; any
// earlier claims under its name are released first.
func (a *Allocator) Observe(n Node) Observation {
	rec := a.nodes[n.Name]
	if rec != nil && rec.uid != n.UID {
		a.Forget(n.Name)
		rec = nil
	}
	if len(n.PodCIDRs) == 0 {
		return Observation{NeedsCIDRs: true}
	}
	var obs Observation
	var cidrs []netip.Prefix
	for _, s := range n.PodCIDRs {
		c, err := parseCIDR(s)
		if err != nil || a.poolFor(c) == nil {
			obs.Unusable = append(obs.Unusable, s)
			continue
		}
		cidrs = append(cidrs, c)
	}
	if rec != nil && !rec.pending && samePrefixes(rec.cidrs, cidrs) {
		return Observation{}
	}
	if rec != nil {
		a.Forget(n.Name)
	}
	obs.Changed = true
	var kept []netip.Prefix
	for _, c := range cidrs {
		holders, err := a.poolFor(c).Claim(n.Name, c)
		if err != nil {
			obs.Unusable = append(obs.Unusable, c.String())
			continue
		}
		kept = append(kept, c)
		if len(holders) > 0 {
			obs.Conflicts = append(obs.Conflicts, Conflict{CIDR: c.String(), Holders: holders})
		}
	}
	a.nodes[n.Name] = &record{uid: n.UID, cidrs: kept}
	return obs
}

// Reserve chooses pod CIDRs for a node without any: one per pool, primary family first. Asked
// again for the same Node before its CIDRs are seen on it, it returns the same ones (a write
// whose outcome is unknown is retried with them, never with others).
func (a *Allocator) Reserve(n Node) ([]netip.Prefix, error) {
	if rec := a.nodes[n.Name]; rec != nil {
		if rec.uid == n.UID && rec.pending {
			return append([]netip.Prefix(nil), rec.cidrs...), nil
		}
		a.Forget(n.Name)
	}
	var got []netip.Prefix
	for _, p := range a.pools {
		c, err := p.Allocate(n.Name)
		if err != nil {
			// Undo, cursors included: a family that is full must not make the other skip ahead.
			for i, g := range got {
				a.pools[i].Release(n.Name, g)
				a.pools[i].next = a.pools[i].slotOf(g.Addr())
			}
			return nil, err
		}
		got = append(got, c)
	}
	a.nodes[n.Name] = &record{uid: n.UID, cidrs: got, pending: true}
	return append([]netip.Prefix(nil), got...), nil
}

// Holds reports the node's recorded CIDRs and whether they are still pending.
func (a *Allocator) Holds(name string) (uid string, cidrs []netip.Prefix, pending bool) {
	rec := a.nodes[name]
	if rec == nil {
		return "", nil, false
	}
	return rec.uid, append([]netip.Prefix(nil), rec.cidrs...), rec.pending
}

// Forget releases what a node holds (its Node is gone). Parts another node also claimed (a
// conflict) go back to that node, so they are not handed out again.
func (a *Allocator) Forget(name string) {
	rec := a.nodes[name]
	if rec == nil {
		return
	}
	delete(a.nodes, name)
	for _, c := range rec.cidrs {
		p := a.poolFor(c)
		p.Release(name, c)
		for other, orec := range a.nodes {
			for _, oc := range orec.cidrs {
				if a.poolFor(oc) == p && oc.Overlaps(c) {
					p.Claim(other, oc) //nolint:errcheck // it was claimed from this pool before
				}
			}
		}
	}
}

// ForgetUID releases what a node holds if it is still the Node with that UID.
func (a *Allocator) ForgetUID(name, uid string) {
	if rec := a.nodes[name]; rec != nil && rec.uid == uid {
		a.Forget(name)
	}
}

func samePrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
