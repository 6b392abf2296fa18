package plan

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func pfxString(ps []netip.Prefix) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ", ")
}

func TestAggregatePrefixes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []netip.Prefix
		want string
	}{
		{"nothing", nil, ""},
		{"overlaps and a repeat", pfx("10.20.0.0/16", "192.168.0.1/32", "10.20.8.0/24", "10.20.9.0/25", "10.20.8.1/32", "192.168.0.1/32"),
			"10.20.0.0/16, 192.168.0.1/32"},
		{"repeats only", pfx("192.168.0.1/32", "192.168.0.1/32"), "192.168.0.1/32"},
		{"disjoint ranges keep address order", pfx("192.168.1.0/24", "10.0.0.0/8"), "10.0.0.0/8, 192.168.1.0/24"},
		{"same address, shorter first", pfx("10.0.0.0/24", "10.0.0.0/8"), "10.0.0.0/8"},
		{"two halves are one prefix", pfx("192.168.0.1/32", "192.168.0.0/32"), "192.168.0.0/31"},
		{"halves fold upwards", pfx("10.0.0.0/25", "10.0.0.192/26", "10.0.0.128/26"), "10.0.0.0/24"},
		{"neighbours of different parents stay", pfx("10.0.0.1/32", "10.0.0.2/32"), "10.0.0.1/32, 10.0.0.2/32"},
		{"allow-all absorbs everything of its family", pfx("10.0.0.0/8", "0.0.0.0/0", "2001:db8::/32"), "0.0.0.0/0, 2001:db8::/32"},
		{"IPv4 first, each family aggregated", pfx("2001:db8:1::/48", "10.1.0.0/16", "2001:db8::/32", "2001:db9::/48", "10.1.2.0/24"),
			"10.1.0.0/16, 2001:db8::/32, 2001:db9::/48"},
		{"unmasked prefixes are masked", pfx("10.1.2.3/16", "10.1.0.0/16"), "10.1.0.0/16"},
		{"invalid entries are skipped", []netip.Prefix{{}, netip.MustParsePrefix("10.0.0.0/8")}, "10.0.0.0/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := AggregatePrefixes(tc.in)
			if pfxString(got) != tc.want {
				t.Fatalf("got %q, want %q", pfxString(got), tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Fatalf("input changed: %v", tc.in)
			}
			if again := AggregatePrefixes(got); !slices.Equal(again, got) {
				t.Fatalf("not a fixed point: %v → %v", got, again)
			}
			// The order of the input does not matter.
			r := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				shuffled := slices.Clone(tc.in)
				r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				if s := pfxString(AggregatePrefixes(shuffled)); s != tc.want {
					t.Fatalf("input %v gave %q", shuffled, s)
				}
			}
		})
	}
}

// The aggregate covers exactly the addresses of the input: checked address by address over a
// small space with random prefixes.
func TestAggregatePrefixesCoversTheSameAddresses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		var in []netip.Prefix
		for range 1 + r.IntN(8) {
			bits := 24 + r.IntN(9)
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(256))})
			in = append(in, netip.PrefixFrom(a, bits).Masked())
		}
		got := AggregatePrefixes(in)
		for i := range 256 {
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
			want := slices.ContainsFunc(in, func(p netip.Prefix) bool { return p.Contains(a) })
			n := 0
			for _, p := range got {
				if p.Contains(a) {
					n++
				}
			}
			if (n == 1) != want || n > 1 {
				t.Fatalf("%v → %v: %s covered %d times, want %t", in, got, a, n, want)
			}
		}
		for i := 1; i < len(got); i++ {
			if _, ok := siblings(got[i-1], got[i]); ok {
				t.Fatalf("%v → %v: %s and %s not folded", in, got, got[i-1], got[i])
			}
		}
	}
}
