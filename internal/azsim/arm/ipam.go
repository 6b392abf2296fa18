package arm

import (
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"
)

// ipam records which address of an address space is held by which owner. An
// owner is a lower-cased resource ID (or a child ID such as a NIC ip
// configuration); deleting a resource releases everything owned under it.
type ipam struct {
	// spaces: space name -> address -> owner key
	Spaces map[string]map[string]string `json:"spaces"`
	// owners: owner key -> its addresses (the reverse of Spaces, rebuilt
	// lazily after a restore) so that per-owner lookups are O(1), not a scan
	// of every address of a space.
	owners map[string][]slot
}

type slot struct{ space, addr string }

func newIPAM() *ipam { return &ipam{Spaces: map[string]map[string]string{}} }

// index builds the owner index if needed (after a restore).
func (p *ipam) index() {
	if p.owners != nil {
		return
	}
	p.owners = map[string][]slot{}
	for space, sp := range p.Spaces {
		for a, o := range sp {
			p.owners[o] = append(p.owners[o], slot{space, a})
		}
	}
}

func (p *ipam) set(space, addr, owner string) {
	p.index()
	sp := p.Spaces[space]
	if sp == nil {
		sp = map[string]string{}
		p.Spaces[space] = sp
	}
	if cur, held := sp[addr]; held {
		if cur == owner {
			return
		}
		p.unlink(cur, space, addr)
	}
	sp[addr] = owner
	p.owners[owner] = append(p.owners[owner], slot{space, addr})
}

func (p *ipam) del(space, addr string) {
	p.index()
	if o, held := p.Spaces[space][addr]; held {
		delete(p.Spaces[space], addr)
		p.unlink(o, space, addr)
	}
}

func (p *ipam) unlink(owner, space, addr string) {
	ss := p.owners[owner]
	for i, s := range ss {
		if s.space == space && s.addr == addr {
			ss = append(ss[:i:i], ss[i+1:]...)
			break
		}
	}
	if len(ss) == 0 {
		delete(p.owners, owner)
	} else {
		p.owners[owner] = ss
	}
}

// held returns the addresses owner holds in space.
func (p *ipam) held(space, owner string) []string {
	p.index()
	var out []string
	for _, s := range p.owners[owner] {
		if s.space == space {
			out = append(out, s.addr)
		}
	}
	return out
}

// dropOwners releases everything held by owners for which match is true.
func (p *ipam) dropOwners(match func(owner string) bool) {
	p.index()
	for o, ss := range p.owners {
		if !match(o) {
			continue
		}
		for _, s := range ss {
			delete(p.Spaces[s.space], s.addr)
		}
		delete(p.owners, o)
	}
}

func (p *ipam) releaseUnder(ownerKey string) {
	p.dropOwners(func(o string) bool { return o == ownerKey || strings.HasPrefix(o, ownerKey+"/") })
}

// IPRange is an address range an allocation can draw from.
type IPRange struct {
	Prefix netip.Prefix
	// SkipLow / SkipHigh exclude addresses at the start / end of the prefix
	// (Azure subnets reserve the first 4 and the last address).
	SkipLow, SkipHigh int
}

// ReserveIP reserves an address in a named space for owner (an ID). With want
// set, that exact address is reserved (it must lie in one of the ranges and be
// free or already held by the same owner); otherwise the lowest free address of
// the first range with room is used. If owner already holds an address in the
// space within the ranges and want is empty, that address is returned (so
// re-PUTs keep their dynamic IPs).
func (tx *Tx) ReserveIP(space string, ranges []IPRange, owner, want string) (string, error) {
	p := tx.e.ipam
	p.index()
	sp := p.Spaces[space]
	ok := KeyOf(owner)
	inRanges := func(a netip.Addr) bool {
		for _, r := range ranges {
			if r.Prefix.Contains(a) && usable(r, a) {
				return true
			}
		}
		return false
	}
	if want != "" {
		a, err := netip.ParseAddr(want)
		if err != nil {
			return "", BadRequest("InvalidRequestFormat", "Cannot parse the IP address '%s'.", want)
		}
		if !inRanges(a) {
			return "", BadRequest("PrivateIPAddressNotInSubnet", "IP address %s does not belong to the address range of the target.", want)
		}
		if cur, held := sp[a.String()]; held && cur != ok {
			return "", BadRequest("PrivateIPAddressInUse", "IP configuration %s is using the private IP address %s which is already allocated to resource %s.", owner, want, cur)
		}
		// Drop any other address this owner held in the space.
		for _, addr := range p.held(space, ok) {
			if addr != a.String() {
				p.del(space, addr)
			}
		}
		p.set(space, a.String(), ok)
		return a.String(), nil
	}
	for _, addr := range p.held(space, ok) {
		if a, err := netip.ParseAddr(addr); err == nil && inRanges(a) {
			return addr, nil
		}
		p.del(space, addr)
	}
	for _, r := range ranges {
		if a, found := firstFree(r, p.Spaces[space]); found {
			p.set(space, a.String(), ok)
			return a.String(), nil
		}
	}
	return "", Errorf(http.StatusBadRequest, "SubnetIsFull", "No free IP address is available in the address space for %s.", owner)
}

// ReleaseIP frees whatever the owner (exact key) holds in a space.
func (tx *Tx) ReleaseIP(space, owner string) {
	p := tx.e.ipam
	for _, addr := range p.held(space, KeyOf(owner)) {
		p.del(space, addr)
	}
}

// ReleaseIPsExcept frees reservations held by owners under ownerPrefix (an ID)
// that are not in keep (IDs). Handlers call it after a full-replacement PUT so
// that removed ip configurations give their addresses back.
func (tx *Tx) ReleaseIPsExcept(ownerPrefix string, keep []string) {
	pk := KeyOf(ownerPrefix)
	km := map[string]bool{}
	for _, k := range keep {
		km[KeyOf(k)] = true
	}
	tx.e.ipam.dropOwners(func(o string) bool { return (o == pk || strings.HasPrefix(o, pk+"/")) && !km[o] })
}

// HeldIP returns an address owner holds in a space (O(1); no allocation).
func (tx *Tx) HeldIP(space, owner string) (string, bool) {
	if a := tx.e.ipam.held(space, KeyOf(owner)); len(a) > 0 {
		return a[0], true
	}
	return "", false
}

// IPOwner returns the owner key of an address in a space.
func (tx *Tx) IPOwner(space, addr string) (string, bool) {
	o, ok := tx.e.ipam.Spaces[space][addr]
	return o, ok
}

// IPsInSpace lists the reserved addresses of a space (sorted), for tests and the control API.
func (tx *Tx) IPsInSpace(space string) []string {
	var out []string
	for a := range tx.e.ipam.Spaces[space] {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Usable reports whether a lies in the range and is not one of the addresses it keeps back
// (a subnet's first four and last).
func (r IPRange) Usable(a netip.Addr) bool { return r.Prefix.Contains(a) && usable(r, a) }

// FreeIPs lists up to n usable addresses of r that no owner holds in space, the first after
// from and on in order, then from the start of the range up to from.
func (tx *Tx) FreeIPs(space string, r IPRange, from netip.Addr, n int) []string {
	used := tx.e.ipam.Spaces[space]
	var out []string
	take := func(a netip.Addr) bool {
		if _, taken := used[a.String()]; !taken && usable(r, a) {
			out = append(out, a.String())
		}
		return len(out) < n
	}
	const maxScan = 1 << 20
	scanned := 0
	for a := from.Next(); a.IsValid() && r.Prefix.Contains(a) && scanned < maxScan; a = a.Next() {
		scanned++
		if !take(a) {
			return out
		}
	}
	for a := r.Prefix.Masked().Addr(); a.IsValid() && a.Less(from) && scanned < maxScan; a = a.Next() {
		scanned++
		if !take(a) {
			return out
		}
	}
	return out
}

func usable(r IPRange, a netip.Addr) bool {
	first := r.Prefix.Masked().Addr()
	if idx := offset(first, a); idx < uint64(r.SkipLow) {
		return false
	}
	bits := a.BitLen() - r.Prefix.Bits()
	if bits < 63 {
		size := uint64(1) << bits
		if offset(first, a) >= size-uint64(r.SkipHigh) {
			return false
		}
	}
	return true
}

// offset is a-first for addresses in the same prefix (saturating at 2^64).
func offset(first, a netip.Addr) uint64 {
	fb, ab := first.As16(), a.As16()
	// Upper half differences only occur for huge IPv6 prefixes; treat as far away.
	for i := 0; i < 8; i++ {
		if ab[i] != fb[i] {
			return ^uint64(0)
		}
	}
	var f, x uint64
	for i := 8; i < 16; i++ {
		f = f<<8 | uint64(fb[i])
		x = x<<8 | uint64(ab[i])
	}
	return x - f
}

func firstFree(r IPRange, used map[string]string) (netip.Addr, bool) {
	a := r.Prefix.Masked().Addr()
	for i := 0; i < r.SkipLow; i++ {
		a = a.Next()
	}
	const maxScan = 1 << 20
	for n := 0; n < maxScan && a.IsValid() && r.Prefix.Contains(a); n++ {
		if !usable(r, a) {
			return netip.Addr{}, false
		}
		if _, taken := used[a.String()]; !taken {
			return a, true
		}
		a = a.Next()
	}
	return netip.Addr{}, false
}

// ParseRange is a helper for handlers: a CIDR string with Azure's subnet reservations.
func ParseRange(cidr string, skipLow, skipHigh int) (IPRange, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil {
		return IPRange{}, fmt.Errorf("invalid address prefix %q", cidr)
	}
	return IPRange{Prefix: p.Masked(), SkipLow: skipLow, SkipHigh: skipHigh}, nil
}

// Reserve records addr in space for owner without range checks (block
// reservations such as public IP prefixes). It fails if another owner holds it.
func (tx *Tx) Reserve(space, addr, owner string) error {
	ok := KeyOf(owner)
	if cur, held := tx.e.ipam.Spaces[space][addr]; held && cur != ok {
		return BadRequest("IPAddressInUse", "Address %s is already allocated to %s.", addr, cur)
	}
	tx.e.ipam.set(space, addr, ok)
	return nil
}
