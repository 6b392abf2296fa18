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
		if got := AddressesKey(seed, tc.nodes, nil) == AddressesKey(seed, base, nil); got != tc.same {
			t.Errorf("%s: same key %v, want %v", tc.name, got, tc.same)
		}
	}
}

// A filtered key equals the key of the filtered list.
func TestAddressesKeyFiltered(t *testing.T) {
	seed := maphash.MakeSeed()
	var all, even []*v1.Node
	for i := range 10 {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(rune('a' + i))},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0." + string(rune('0'+i))}}}}
		all = append(all, n)
		if i%2 == 0 {
			even = append(even, n)
		}
	}
	isEven := func(n *v1.Node) bool { return (n.Name[0]-'a')%2 == 0 }
	if AddressesKey(seed, all, isEven) != AddressesKey(seed, even, nil) {
		t.Fatal("the filtered key differs from the key of the filtered nodes")
	}
	if AddressesKey(seed, all, isEven) == AddressesKey(seed, all, nil) {
		t.Fatal("the filter was not applied")
	}
}
