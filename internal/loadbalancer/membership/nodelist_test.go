package membership

import (
	"hash/maphash"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAddressesKey(t *testing.T) {
	node := func(name, rv string, addrs ...v1.NodeAddress) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}, Status: v1.NodeStatus{Addresses: addrs}}
	}
	internal := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a} }
	external := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a} }
	base := []*v1.Node{node("a", "1", internal("10.0.0.4")), node("b", "1", internal("10.0.0.5"))}
	seed := maphash.MakeSeed()
	for _, tc := range []struct {
		name  string
		nodes []*v1.Node
		same  bool
	}{
		{"new resource versions", []*v1.Node{node("a", "9", internal("10.0.0.4")), node("b", "3", internal("10.0.0.5"))}, true},
		{"another order", []*v1.Node{base[1], base[0]}, true},
		{"an external address added", []*v1.Node{node("a", "2", internal("10.0.0.4"), external("1.2.3.4")), base[1]}, true},
		{"an address changed", []*v1.Node{node("a", "2", internal("10.0.0.6")), base[1]}, false},
		{"an address added", []*v1.Node{node("a", "2", internal("10.0.0.4"), internal("fd00::4")), base[1]}, false},
		{"addresses swapped between nodes", []*v1.Node{node("a", "2", internal("10.0.0.5")), node("b", "2", internal("10.0.0.4"))}, false},
		{"a node renamed", []*v1.Node{node("c", "1", internal("10.0.0.4")), base[1]}, false},
		{"a node left", base[:1], false},
		{"a node twice", []*v1.Node{base[0], base[1], base[1]}, false},
	} {
		if got := AddressesKey(seed, tc.nodes) == AddressesKey(seed, base); got != tc.same {
			t.Errorf("%s: same key %v, want %v", tc.name, got, tc.same)
		}
	}
}
