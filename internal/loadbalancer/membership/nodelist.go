package membership

import (
	"hash/maphash"
	"math/bits"

	v1 "k8s.io/api/core/v1"
)

// NodeListKey identifies a node list by its objects' names and resource versions, in any order:
// an informer replaces a node's object, with a new resource version, on every change of it, so
// equal keys mean the same nodes as the API server had them. ok is false when a node has no
// resource version (built by hand, not read from the API server): nothing computed from such a
// list may be remembered under its key.
func NodeListKey(seed maphash.Seed, nodes []*v1.Node) (key uint64, ok bool) {
	var set setHash
	var h maphash.Hash
	h.SetSeed(seed)
	for _, node := range nodes {
		if node == nil {
			continue
		}
		if node.ResourceVersion == "" {
			return 0, false
		}
		h.Reset()
		_, _ = h.WriteString(node.Name)
		_ = h.WriteByte(0)
		_, _ = h.WriteString(node.ResourceVersion)
		set.add(h.Sum64())
	}
	return set.sum(), true
}

// setHash combines the hashes of a set's members independently of their order.
type setHash struct {
	total, xor uint64
	n          uint64
}

func (s *setHash) add(x uint64) { s.total, s.xor, s.n = s.total+x, s.xor^x, s.n+1 }

func (s *setHash) sum() uint64 { return s.total ^ bits.RotateLeft64(s.xor, 32) ^ s.n }

// AddressesKey identifies what AddressEntries makes of the nodes include accepts (all when nil):
// their names and internal addresses, in any order. Nodes change often without changing those
// (every status heartbeat gives a node a new resource version), so pool entries remembered under
// this key outlive them. It allocates nothing: a reconcile that finds its entries remembered
// needs no list of its own.
func AddressesKey(seed maphash.Seed, nodes []*v1.Node, include func(*v1.Node) bool) uint64 {
	var set setHash
	var h maphash.Hash
	h.SetSeed(seed)
	for _, node := range nodes {
		if node == nil || (include != nil && !include(node)) {
			continue
		}
		h.Reset()
		_, _ = h.WriteString(node.Name)
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				_ = h.WriteByte(0)
				_, _ = h.WriteString(a.Address)
			}
		}
		set.add(h.Sum64())
	}
	return set.sum()
}
