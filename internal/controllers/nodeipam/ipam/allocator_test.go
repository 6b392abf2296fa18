package ipam

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func specs(t *testing.T, clusters ...string) []Spec {
	t.Helper()
	var out []Spec
	for _, c := range clusters {
		cidr, bits, _ := strings.Cut(c, "@")
		var n int
		if _, err := fmt.Sscan(bits, &n); err != nil {
			t.Fatalf("%s: node bits: %v", c, err)
		}
		out = append(out, Spec{Cluster: netip.MustParsePrefix(cidr), NodeBits: n})
	}
	return out
}

func prefixes(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// op is one input to the allocator and what it must answer.
type op struct {
	do   string // observe, reserve, forget, forgetuid
	node Node
	// observe
	obs Observation
	// reserve
	want []string
	err  string
}

func TestAllocator(t *testing.T) {
	n := func(name, uid string, cidrs ...string) Node { return Node{Name: name, UID: uid, PodCIDRs: cidrs} }
	for _, tc := range []struct {
		name     string
		clusters []string
		ops      []op
	}{
		{
			name: "rebuild from node specs before allocating", clusters: []string{"10.0.0.0/28@30"},
			ops: []op{
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("b", "2", "10.0.0.8/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("c", "3"), obs: Observation{NeedsCIDRs: true}},
				{do: "reserve", node: n("c", "3"), want: []string{"10.0.0.4/30"}},
				{do: "reserve", node: n("d", "4"), want: []string{"10.0.0.12/30"}},
				{do: "reserve", node: n("e", "5"), err: "no free pod CIDR"},
			},
		},
		{
			name: "a pending reservation is returned again, then confirmed", clusters: []string{"10.0.0.0/28@30"},
			ops: []op{
				{do: "reserve", node: n("a", "1"), want: []string{"10.0.0.0/30"}},
				{do: "reserve", node: n("a", "1"), want: []string{"10.0.0.0/30"}},
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{}}, // seen before
				{do: "reserve", node: n("b", "2"), want: []string{"10.0.0.4/30"}},
			},
		},
		{
			name: "someone else set the node's CIDR: the reservation is released", clusters: []string{"10.0.0.0/28@30"},
			ops: []op{
				{do: "reserve", node: n("a", "1"), want: []string{"10.0.0.0/30"}},
				{do: "observe", node: n("a", "1", "10.0.0.12/30"), obs: Observation{Changed: true}},
				{do: "reserve", node: n("b", "2"), want: []string{"10.0.0.4/30"}},
				{do: "reserve", node: n("c", "3"), want: []string{"10.0.0.8/30"}},
				{do: "reserve", node: n("d", "4"), want: []string{"10.0.0.0/30"}},
			},
		},
		{
			name: "a deleted node's CIDR is reused once the range is used up", clusters: []string{"10.0.0.0/29@30"},
			ops: []op{
				{do: "reserve", node: n("a", "1"), want: []string{"10.0.0.0/30"}},
				{do: "reserve", node: n("b", "2"), want: []string{"10.0.0.4/30"}},
				{do: "reserve", node: n("c", "3"), err: "no free pod CIDR"},
				{do: "forget", node: n("a", "1")},
				{do: "reserve", node: n("c", "3"), want: []string{"10.0.0.0/30"}},
			},
		},
		{
			name: "a node recreated under the same name", clusters: []string{"10.0.0.0/29@30"},
			ops: []op{
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("b", "2", "10.0.0.4/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("a", "9"), obs: Observation{NeedsCIDRs: true}}, // old claim released
				{do: "reserve", node: n("a", "9"), want: []string{"10.0.0.0/30"}},
				{do: "forgetuid", node: n("a", "1")}, // late delete of the old Node: no effect
				{do: "reserve", node: n("c", "3"), err: "no free pod CIDR"},
			},
		},
		{
			name: "duplicate CIDRs: the second holder keeps it after the first goes", clusters: []string{"10.0.0.0/29@30"},
			ops: []op{
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("b", "2", "10.0.0.0/30"), obs: Observation{Changed: true,
					Conflicts: []Conflict{{CIDR: "10.0.0.0/30", Holders: []string{"a"}}}}},
				{do: "forget", node: n("a", "1")},
				{do: "reserve", node: n("c", "3"), want: []string{"10.0.0.4/30"}},
				{do: "reserve", node: n("d", "4"), err: "no free pod CIDR"},
			},
		},
		{
			name: "unusable CIDRs are reported and not recorded", clusters: []string{"10.0.0.0/29@30"},
			ops: []op{
				{do: "observe", node: n("a", "1", "192.168.0.0/30", "fd00::/64", "nonsense"), obs: Observation{Changed: true,
					Unusable: []string{"fd00::/64", "nonsense", "192.168.0.0/30"}}},
				{do: "reserve", node: n("b", "2"), want: []string{"10.0.0.0/30"}},
			},
		},
		{
			name: "dual-stack: one CIDR per family, primary first", clusters: []string{"fd00:10::/56@64", "10.0.0.0/29@30"},
			ops: []op{
				{do: "observe", node: n("a", "1", "fd00:10::/64", "10.0.0.0/30"), obs: Observation{Changed: true}},
				{do: "reserve", node: n("b", "2"), want: []string{"fd00:10:0:1::/64", "10.0.0.4/30"}},
				// IPv4 is full: nothing is taken from the IPv6 pool either.
				{do: "reserve", node: n("c", "3"), err: "10.0.0.0/29 (/30 subnets): no free pod CIDR"},
				{do: "forget", node: n("a", "1")},
				{do: "reserve", node: n("c", "3"), want: []string{"fd00:10:0:2::/64", "10.0.0.0/30"}},
			},
		},
		{
			name: "dual-stack cluster, single-stack node keeps what it has", clusters: []string{"10.0.0.0/29@30", "fd00:10::/56@64"},
			ops: []op{
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{Changed: true}},
				{do: "observe", node: n("a", "1", "10.0.0.0/30"), obs: Observation{}},
				{do: "reserve", node: n("b", "2"), want: []string{"10.0.0.4/30", "fd00:10::/64"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAllocator(specs(t, tc.clusters...))
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range tc.ops {
				switch o.do {
				case "observe":
					got := a.Observe(o.node)
					if !reflect.DeepEqual(got, o.obs) {
						t.Fatalf("op %d: observe %+v = %+v, want %+v", i, o.node, got, o.obs)
					}
				case "reserve":
					got, err := a.Reserve(o.node)
					switch {
					case o.err != "" && (err == nil || !strings.Contains(err.Error(), o.err)):
						t.Fatalf("op %d: reserve %s: err %v, want %q", i, o.node.Name, err, o.err)
					case o.err == "" && err != nil:
						t.Fatalf("op %d: reserve %s: %v", i, o.node.Name, err)
					case o.err == "" && !reflect.DeepEqual(prefixes(got), o.want):
						t.Fatalf("op %d: reserve %s = %v, want %v", i, o.node.Name, prefixes(got), o.want)
					}
				case "forget":
					a.Forget(o.node.Name)
				case "forgetuid":
					a.ForgetUID(o.node.Name, o.node.UID)
				}
			}
		})
	}
}

func TestNewAllocatorRefusesTwoOfOneFamily(t *testing.T) {
	if _, err := NewAllocator(specs(t, "10.0.0.0/16@24", "10.1.0.0/16@24")); err == nil {
		t.Fatal("two IPv4 cluster CIDRs accepted")
	}
	if _, err := NewAllocator(nil); err == nil {
		t.Fatal("no cluster CIDR accepted")
	}
}

// A restart rebuilds the same holdings from the Node specs: the new allocator never hands out a
// CIDR a node holds, and hands out what was free.
func TestAllocatorRestartNeverDuplicates(t *testing.T) {
	sp := specs(t, "10.244.0.0/20@24") // 16 subnets
	before, _ := NewAllocator(sp)
	var nodes []Node
	for i := 0; i < 12; i++ {
		n := Node{Name: fmt.Sprintf("n%d", i), UID: fmt.Sprint(i)}
		got, err := before.Reserve(n)
		if err != nil {
			t.Fatal(err)
		}
		n.PodCIDRs = prefixes(got)
		before.Observe(n)
		nodes = append(nodes, n)
	}
	// Three nodes go while the controller is down.
	nodes = append(nodes[:2], nodes[5:]...)
	after, _ := NewAllocator(sp)
	held := map[string]string{}
	for _, n := range nodes {
		if obs := after.Observe(n); len(obs.Conflicts) > 0 {
			t.Fatalf("rebuild conflict: %+v", obs)
		}
		held[n.PodCIDRs[0]] = n.Name
	}
	for i := 0; i < 7; i++ {
		got, err := after.Reserve(Node{Name: fmt.Sprintf("new%d", i), UID: fmt.Sprint(100 + i)})
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		c := got[0].String()
		if h, dup := held[c]; dup {
			t.Fatalf("%s handed out again (held by %s)", c, h)
		}
		held[c] = "new"
	}
	if _, err := after.Reserve(Node{Name: "one-too-many", UID: "x"}); err == nil {
		t.Fatal("17th node got a CIDR from 16")
	}
}
