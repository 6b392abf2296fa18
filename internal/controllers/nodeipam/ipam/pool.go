// Package ipam decides which pod CIDRs nodes get. A Pool cuts one cluster CIDR into node-sized
// subnets ("slots") and records who holds which; an Allocator keeps one pool per IP family and
// the nodes' claims, rebuilt from the Node objects, so that no subnet is handed to two nodes.
// Nothing here talks to the API server: the node-ipam controller feeds it Node specs and writes
// its answers.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
)

// MaxSlotBits bounds the difference between the node mask and the cluster mask: 2^62 slots
// still count in a uint64. (The range allocator of kube-controller-manager stops at 16.)
const MaxSlotBits = 62

// Errors of Pool and Allocator.
var (
	// ErrFull: every node subnet of the cluster CIDR is held.
	ErrFull = errors.New("no free pod CIDR left in the cluster CIDR")
	// ErrOutside: a CIDR does not overlap the cluster CIDR.
	ErrOutside = errors.New("not inside the cluster CIDR")
	// ErrFamily: a CIDR of the other IP family.
	ErrFamily = errors.New("IP family differs from the cluster CIDR's")
)

// Reserved is the owner of ranges no node may get (the service CIDR).
const Reserved = ""

// span is a run of slots [lo, hi) held by one owner.
type span struct {
	lo, hi uint64
	owner  string
}

// Pool hands out the node-sized subnets of one cluster CIDR. Spans are kept sorted and never
// overlap: a range claimed twice (two nodes given one CIDR by someone else) stays with its first
// holder and the second claim is reported as a conflict.
type Pool struct {
	cluster  netip.Prefix
	nodeBits int
	slots    uint64
	spans    []span
	// next is where the search for a free slot starts: after the last one handed out, so that a
	// subnet just released (whose route may still be in the route table) is reused only once
	// the rest of the range is taken.
	next uint64
}

// NewPool makes a pool of /nodeBits subnets of cluster.
func NewPool(cluster netip.Prefix, nodeBits int) (*Pool, error) {
	if !cluster.IsValid() {
		return nil, fmt.Errorf("invalid cluster CIDR %v", cluster)
	}
	cluster = cluster.Masked()
	width := cluster.Addr().BitLen()
	switch {
	case nodeBits < cluster.Bits():
		return nil, fmt.Errorf("node mask /%d is shorter than the cluster CIDR %s", nodeBits, cluster)
	case nodeBits > width:
		return nil, fmt.Errorf("node mask /%d is longer than an address of %s", nodeBits, cluster)
	case nodeBits-cluster.Bits() > MaxSlotBits:
		return nil, fmt.Errorf("node mask /%d cuts %s into more than 2^%d subnets", nodeBits, cluster, MaxSlotBits)
	}
	return &Pool{cluster: cluster, nodeBits: nodeBits, slots: 1 << uint(nodeBits-cluster.Bits())}, nil
}

// Cluster is the pool's cluster CIDR.
func (p *Pool) Cluster() netip.Prefix { return p.cluster }

// NodeBits is the mask of the subnets the pool hands out.
func (p *Pool) NodeBits() int { return p.nodeBits }

// Size is the number of node subnets.
func (p *Pool) Size() uint64 { return p.slots }

// Used is the number of node subnets held (reserved ones included).
func (p *Pool) Used() uint64 {
	var n uint64
	for _, s := range p.spans {
		n += s.hi - s.lo
	}
	return n
}

// IsIPv6 reports the pool's family.
func (p *Pool) IsIPv6() bool { return p.cluster.Addr().Is6() && !p.cluster.Addr().Is4In6() }

// slotRange returns the slots c overlaps.
func (p *Pool) slotRange(c netip.Prefix) (lo, hi uint64, err error) {
	if !c.IsValid() {
		return 0, 0, fmt.Errorf("invalid CIDR %v", c)
	}
	c = c.Masked()
	if c.Addr().BitLen() != p.cluster.Addr().BitLen() {
		return 0, 0, fmt.Errorf("%s: %w %s", c, ErrFamily, p.cluster)
	}
	switch {
	case c.Bits() <= p.cluster.Bits(): // as large as the cluster CIDR or larger
		if !c.Contains(p.cluster.Addr()) {
			return 0, 0, fmt.Errorf("%s: %w %s", c, ErrOutside, p.cluster)
		}
		return 0, p.slots, nil
	case !p.cluster.Contains(c.Addr()):
		return 0, 0, fmt.Errorf("%s: %w %s", c, ErrOutside, p.cluster)
	case c.Bits() >= p.nodeBits: // inside one node subnet
		lo = p.slotOf(c.Addr())
		return lo, lo + 1, nil
	default: // several node subnets
		lo = p.slotOf(c.Addr())
		return lo, lo + 1<<uint(p.nodeBits-c.Bits()), nil
	}
}

// slotOf is the index of the node subnet holding a (inside the cluster CIDR).
func (p *Pool) slotOf(a netip.Addr) uint64 {
	b := a.AsSlice()
	var i uint64
	for bit := p.cluster.Bits(); bit < p.nodeBits; bit++ {
		i = i<<1 | uint64(b[bit/8]>>(7-uint(bit%8))&1)
	}
	return i
}

// Prefix is the node subnet of slot i.
func (p *Pool) prefix(i uint64) netip.Prefix {
	b := p.cluster.Addr().AsSlice()
	for bit := p.nodeBits - 1; bit >= p.cluster.Bits(); bit-- {
		if i&1 == 1 {
			b[bit/8] |= 1 << (7 - uint(bit%8))
		}
		i >>= 1
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, p.nodeBits)
}

// first is the index of the first span ending after slot s.
func (p *Pool) first(s uint64) int {
	return sort.Search(len(p.spans), func(i int) bool { return p.spans[i].hi > s })
}

// cover gives owner the free slots of [lo, hi) and returns the other holders of the rest.
func (p *Pool) cover(lo, hi uint64, owner string) (others []string) {
	var added []span
	cur := lo
	for i := p.first(lo); i < len(p.spans) && p.spans[i].lo < hi; i++ {
		s := p.spans[i]
		if s.lo > cur {
			added = append(added, span{cur, s.lo, owner})
		}
		if s.owner != owner {
			others = appendOnce(others, s.owner)
		}
		cur = max(cur, s.hi)
	}
	if cur < hi {
		added = append(added, span{cur, hi, owner})
	}
	if len(added) > 0 {
		p.spans = append(p.spans, added...)
		sort.Slice(p.spans, func(i, j int) bool { return p.spans[i].lo < p.spans[j].lo })
	}
	return others
}

// uncover frees the slots of [lo, hi) that owner holds.
func (p *Pool) uncover(lo, hi uint64, owner string) {
	kept := p.spans[:0:0]
	for _, s := range p.spans {
		if s.owner != owner || s.hi <= lo || s.lo >= hi {
			kept = append(kept, s)
			continue
		}
		if s.lo < lo {
			kept = append(kept, span{s.lo, lo, owner})
		}
		if s.hi > hi {
			kept = append(kept, span{hi, s.hi, owner})
		}
	}
	p.spans = kept
}

// Claim records that owner holds c. It returns the other holders (Reserved for the service
// range) of any part of c that was already held: those parts stay with them.
func (p *Pool) Claim(owner string, c netip.Prefix) ([]string, error) {
	lo, hi, err := p.slotRange(c)
	if err != nil {
		return nil, err
	}
	return p.cover(lo, hi, owner), nil
}

// Reserve keeps c (clipped to the cluster CIDR) from every node; a c outside is ignored.
func (p *Pool) Reserve(c netip.Prefix) {
	if lo, hi, err := p.slotRange(c); err == nil {
		p.cover(lo, hi, Reserved)
	}
}

// Release frees the parts of c that owner holds.
func (p *Pool) Release(owner string, c netip.Prefix) {
	if lo, hi, err := p.slotRange(c); err == nil {
		p.uncover(lo, hi, owner)
	}
}

// Allocate gives owner the first free node subnet at or after the cursor, wrapping once.
func (p *Pool) Allocate(owner string) (netip.Prefix, error) {
	start := p.next % p.slots
	s, ok := p.firstFree(start, p.slots)
	if !ok {
		s, ok = p.firstFree(0, start)
	}
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%s (/%d subnets): %w", p.cluster, p.nodeBits, ErrFull)
	}
	p.cover(s, s+1, owner)
	p.next = s + 1
	return p.prefix(s), nil
}

// firstFree finds the first slot of [from, to) no span covers.
func (p *Pool) firstFree(from, to uint64) (uint64, bool) {
	cur := from
	for i := p.first(from); i < len(p.spans) && cur < to; i++ {
		if p.spans[i].lo > cur {
			break
		}
		cur = max(cur, p.spans[i].hi)
	}
	return cur, cur < to
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
