package plan

import (
	"net/netip"
	"slices"
)

// AggregatePrefixes is the shortest list of prefixes covering exactly the addresses of ps:
// duplicates go, a prefix inside another goes, and two halves of one prefix become that prefix.
// IPv4 prefixes come first, then IPv6, each family by address (then length). NRP refuses a
// security rule whose address list repeats a value (SecurityRuleParameterContainsDuplicateValue)
// or holds overlapping ranges (OverlappingSubnetsNotPermittedInSecurityRule); the existing
// provider writes the aggregate, so the rule name (a hash of the sources) matches its rules too.
func AggregatePrefixes(ps []netip.Prefix) []netip.Prefix {
	var v4, v6 []netip.Prefix
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return append(aggregateFamily(v4), aggregateFamily(v6)...)
}

// aggregateFamily aggregates prefixes of one family. Sorted by address and then by length,
// a prefix is either inside the last one kept or after it, so one pass suffices; a prefix
// completing its sibling is folded into the parent, repeatedly.
func aggregateFamily(ps []netip.Prefix) []netip.Prefix {
	if len(ps) == 0 {
		return nil
	}
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	out := []netip.Prefix{ps[0]}
	for _, p := range ps[1:] {
		if last := out[len(out)-1]; last.Contains(p.Addr()) && last.Bits() <= p.Bits() {
			continue
		}
		out = append(out, p)
		for len(out) >= 2 {
			parent, ok := siblings(out[len(out)-2], out[len(out)-1])
			if !ok {
				break
			}
			out = append(out[:len(out)-2], parent)
		}
	}
	return out
}

// siblings reports whether a and b are the two halves of one prefix, and returns it.
func siblings(a, b netip.Prefix) (netip.Prefix, bool) {
	if a.Bits() != b.Bits() || a.Bits() == 0 {
		return netip.Prefix{}, false
	}
	parent, err := a.Addr().Prefix(a.Bits() - 1)
	if err != nil || parent.Addr() != a.Addr() {
		return netip.Prefix{}, false // a is the upper half of its parent
	}
	if other, err := b.Addr().Prefix(b.Bits() - 1); err != nil || other != parent {
		return netip.Prefix{}, false
	}
	return parent, true
}
