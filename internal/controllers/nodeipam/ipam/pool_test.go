package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

func mustPool(t *testing.T, cluster string, bits int) *Pool {
	t.Helper()
	p, err := NewPool(netip.MustParsePrefix(cluster), bits)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPool(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		bits    int
		size    uint64
		wantErr bool
	}{
		{"10.244.0.0/16", 24, 256, false},
		{"10.244.7.9/16", 24, 256, false}, // host bits are dropped
		{"10.244.0.0/24", 24, 1, false},
		{"10.244.0.0/16", 32, 65536, false},
		{"10.244.0.0/16", 15, 0, true},
		{"10.244.0.0/16", 33, 0, true},
		{"fd00::/48", 64, 65536, false},
		{"fd00::/8", 64, 1 << 56, false},
		{"fd00::/8", 128, 0, true}, // 2^120 subnets
	} {
		p, err := NewPool(netip.MustParsePrefix(tc.cluster), tc.bits)
		if (err != nil) != tc.wantErr {
			t.Errorf("NewPool(%s, %d) err = %v, want error %v", tc.cluster, tc.bits, err, tc.wantErr)
			continue
		}
		if err == nil && p.Size() != tc.size {
			t.Errorf("NewPool(%s, %d).Size() = %d, want %d", tc.cluster, tc.bits, p.Size(), tc.size)
		}
	}
}

func TestPoolSlotRange(t *testing.T) {
	p := mustPool(t, "10.244.0.0/16", 24)
	p6 := mustPool(t, "fd00:10:244::/56", 64)
	for _, tc := range []struct {
		pool   *Pool
		cidr   string
		lo, hi uint64
		err    error
	}{
		{p, "10.244.0.0/24", 0, 1, nil},
		{p, "10.244.255.0/24", 255, 256, nil},
		{p, "10.244.3.128/25", 3, 4, nil},      // smaller than a node subnet: its slot
		{p, "10.244.4.0/22", 4, 8, nil},        // four node subnets
		{p, "10.244.0.0/16", 0, 256, nil},      // the whole cluster CIDR
		{p, "10.0.0.0/8", 0, 256, nil},         // larger than the cluster CIDR
		{p, "10.245.0.0/24", 0, 0, ErrOutside}, // next to it
		{p, "10.248.0.0/13", 0, 0, ErrOutside}, // larger, elsewhere
		{p, "fd00::/64", 0, 0, ErrFamily},      // other family
		{p6, "fd00:10:244:ff::/64", 255, 256, nil},
		{p6, "fd00:10:244:12::/63", 18, 20, nil},
		{p6, "fd00:10:244:12::1/128", 18, 19, nil},
		{p6, "fd00:10:245::/64", 0, 0, ErrOutside},
	} {
		lo, hi, err := tc.pool.slotRange(netip.MustParsePrefix(tc.cidr))
		if !errors.Is(err, tc.err) {
			t.Errorf("%s in %s: err %v, want %v", tc.cidr, tc.pool.Cluster(), err, tc.err)
			continue
		}
		if err == nil && (lo != tc.lo || hi != tc.hi) {
			t.Errorf("%s in %s: slots [%d,%d), want [%d,%d)", tc.cidr, tc.pool.Cluster(), lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestPoolPrefixRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		bits    int
		slot    uint64
		want    string
	}{
		{"10.244.0.0/16", 24, 0, "10.244.0.0/24"},
		{"10.244.0.0/16", 24, 255, "10.244.255.0/24"},
		{"10.244.0.0/16", 26, 5, "10.244.1.64/26"},
		{"10.0.0.0/8", 20, 4095, "10.255.240.0/20"},
		{"fd00:10:244::/48", 64, 0x1234, "fd00:10:244:1234::/64"},
		{"fd00::/8", 64, 1<<56 - 1, "fdff:ffff:ffff:ffff::/64"},
		{"2001:db8::/32", 80, 0xabcd_0001_0002, "2001:db8:abcd:1:2::/80"},
	} {
		p := mustPool(t, tc.cluster, tc.bits)
		got := p.prefix(tc.slot)
		if got.String() != tc.want {
			t.Errorf("%s /%d slot %d = %s, want %s", tc.cluster, tc.bits, tc.slot, got, tc.want)
		}
		if back := p.slotOf(got.Addr()); back != tc.slot {
			t.Errorf("%s /%d: slotOf(%s) = %d, want %d", tc.cluster, tc.bits, got, back, tc.slot)
		}
	}
}

// step is one operation on a pool and what it must give.
type step struct {
	op     string // claim, reserve, release, alloc
	owner  string
	cidr   string
	want   string   // alloc: the CIDR; claim: comma-free holder list in others
	others []string // claim: other holders
	err    error
	used   uint64
}

func TestPoolOperations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster string
		bits    int
		steps   []step
	}{
		{
			name: "allocates in order and never hands out a claimed subnet", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "claim", owner: "a", cidr: "10.0.0.4/30", used: 1},
				{op: "alloc", owner: "b", want: "10.0.0.0/30", used: 2},
				{op: "alloc", owner: "c", want: "10.0.0.8/30", used: 3},
				{op: "alloc", owner: "d", want: "10.0.0.12/30", used: 4},
				{op: "alloc", owner: "e", err: ErrFull, used: 4},
			},
		},
		{
			name: "a released subnet is reused only after the rest of the range", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "alloc", owner: "a", want: "10.0.0.0/30"},
				{op: "alloc", owner: "b", want: "10.0.0.4/30"},
				{op: "release", owner: "a", cidr: "10.0.0.0/30", used: 1},
				{op: "alloc", owner: "c", want: "10.0.0.8/30"},
				{op: "alloc", owner: "d", want: "10.0.0.12/30"},
				{op: "alloc", owner: "e", want: "10.0.0.0/30", used: 4}, // wrapped
				{op: "alloc", owner: "f", err: ErrFull},
				{op: "release", owner: "c", cidr: "10.0.0.8/30", used: 3},
				{op: "alloc", owner: "g", want: "10.0.0.8/30", used: 4},
			},
		},
		{
			name: "release by another owner frees nothing", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "claim", owner: "a", cidr: "10.0.0.0/30", used: 1},
				{op: "release", owner: "b", cidr: "10.0.0.0/30", used: 1},
				{op: "release", owner: "a", cidr: "10.0.0.0/30", used: 0},
			},
		},
		{
			name: "a double claim stays with the first holder", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "claim", owner: "a", cidr: "10.0.0.0/30", used: 1},
				{op: "claim", owner: "b", cidr: "10.0.0.0/29", others: []string{"a"}, used: 2},
				{op: "claim", owner: "a", cidr: "10.0.0.0/30", used: 2}, // idempotent
				{op: "release", owner: "b", cidr: "10.0.0.0/29", used: 1},
				{op: "alloc", owner: "c", want: "10.0.0.4/30"},
			},
		},
		{
			name: "the service range is never handed out", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "reserve", cidr: "10.0.0.4/31", used: 1},
				{op: "reserve", cidr: "192.168.0.0/16", used: 1}, // outside: ignored
				{op: "alloc", owner: "a", want: "10.0.0.0/30"},
				{op: "alloc", owner: "b", want: "10.0.0.8/30"},
				{op: "claim", owner: "c", cidr: "10.0.0.4/30", others: []string{Reserved}},
				{op: "release", owner: "c", cidr: "10.0.0.4/30", used: 3},
				{op: "alloc", owner: "d", want: "10.0.0.12/30"},
				{op: "alloc", owner: "e", err: ErrFull},
			},
		},
		{
			name: "claims outside or of the other family are refused", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "claim", owner: "a", cidr: "10.0.1.0/30", err: ErrOutside, used: 0},
				{op: "claim", owner: "a", cidr: "fd00::/64", err: ErrFamily, used: 0},
			},
		},
		{
			name: "a node subnet larger than the mask holds several", cluster: "10.0.0.0/28", bits: 30,
			steps: []step{
				{op: "claim", owner: "a", cidr: "10.0.0.4/29", used: 2}, // 10.0.0.0/29 after masking
				{op: "alloc", owner: "b", want: "10.0.0.8/30"},
				{op: "release", owner: "a", cidr: "10.0.0.0/30", used: 2}, // partial release
				{op: "alloc", owner: "c", want: "10.0.0.12/30"},
				{op: "alloc", owner: "d", want: "10.0.0.0/30", used: 4},
			},
		},
		{
			name: "IPv6 with 2^56 subnets", cluster: "fd00::/8", bits: 64,
			steps: []step{
				{op: "claim", owner: "a", cidr: "fd00::/64"},
				{op: "alloc", owner: "b", want: "fd00:0:0:1::/64"},
				{op: "claim", owner: "c", cidr: "fd00:0:0:2::/63"},
				{op: "alloc", owner: "d", want: "fd00:0:0:4::/64", used: 5},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPool(t, tc.cluster, tc.bits)
			for i, s := range tc.steps {
				var err error
				switch s.op {
				case "claim":
					var others []string
					others, err = p.Claim(s.owner, netip.MustParsePrefix(s.cidr))
					if !slices.Equal(others, s.others) {
						t.Fatalf("step %d: claim %s by %s: others %q, want %q", i, s.cidr, s.owner, others, s.others)
					}
				case "reserve":
					p.Reserve(netip.MustParsePrefix(s.cidr))
				case "release":
					p.Release(s.owner, netip.MustParsePrefix(s.cidr))
				case "alloc":
					var got netip.Prefix
					got, err = p.Allocate(s.owner)
					if err == nil && got.String() != s.want {
						t.Fatalf("step %d: allocate for %s = %s, want %s", i, s.owner, got, s.want)
					}
				}
				if !errors.Is(err, s.err) {
					t.Fatalf("step %d (%s %s): err %v, want %v", i, s.op, s.cidr, err, s.err)
				}
				if s.used != 0 || s.op == "release" || s.op == "claim" && s.err != nil {
					if got := p.Used(); got != s.used {
						t.Fatalf("step %d (%s %s): used %d, want %d", i, s.op, s.cidr, got, s.used)
					}
				}
			}
		})
	}
}

// Every node subnet is handed out exactly once until the pool is full, whatever the order of
// claims and releases.
func TestPoolNeverHandsOutTwice(t *testing.T) {
	p := mustPool(t, "10.10.0.0/20", 26) // 64 subnets
	held := map[netip.Prefix]string{}
	for i := 0; i < 500; i++ {
		owner := string(rune('a' + i%26))
		if i%3 == 2 && len(held) > 0 {
			for c, o := range held { // release one
				p.Release(o, c)
				delete(held, c)
				break
			}
			continue
		}
		c, err := p.Allocate(owner)
		if errors.Is(err, ErrFull) {
			if len(held) != 64 {
				t.Fatalf("full with %d held", len(held))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if o, dup := held[c]; dup {
			t.Fatalf("%s handed to %s while %s holds it", c, owner, o)
		}
		held[c] = owner
		if uint64(len(held)) != p.Used() {
			t.Fatalf("used %d, held %d", p.Used(), len(held))
		}
	}
}
