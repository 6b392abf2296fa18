package multislb

import (
	"hash/maphash"
	"math/bits"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
)

// nodeView is what node placement reads of a node list: the nodes eligible for pools and
// their fingerprint. It is shared between callers and never modified.
type nodeView struct {
	key      uint64
	eligible []*v1.Node
	fp       uint64
}

// nodeViews remembers the view of the last node list it was given. Every service reconcile
// passes the same informer objects; at 10,000 nodes filtering and hashing them on every call
// was a quarter of the CCM's CPU in a burst of services.
type nodeViews struct {
	filter membership.NodeFilter
	// labelKeys are the labels placement reads (placement.NodeLabelKeys).
	labelKeys []string
	seed      maphash.Seed

	mu   sync.Mutex
	last *nodeView
}

func newNodeViews(filter membership.NodeFilter, labelKeys []string) *nodeViews {
	return &nodeViews{filter: filter, labelKeys: labelKeys, seed: maphash.MakeSeed()}
}

// of returns the view of all, from memory when all is the node list of the last call.
func (v *nodeViews) of(all []*v1.Node) *nodeView {
	key, ok := v.listKey(all)
	if ok {
		v.mu.Lock()
		last := v.last
		v.mu.Unlock()
		if last != nil && last.key == key {
			return last
		}
	}
	eligible := v.filter.Eligible(all)
	nv := &nodeView{key: key, eligible: eligible, fp: placement.NodesFingerprint(eligible, v.labelKeys)}
	if ok {
		v.mu.Lock()
		v.last = nv
		v.mu.Unlock()
	}
	return nv
}

// listKey identifies a node list by its objects' names and resource versions, in any order:
// an informer replaces a node's object, with a new resource version, on every change of it.
// ok is false when a node has no resource version (not read from the API server): such a list
// is always filtered and hashed afresh.
func (v *nodeViews) listKey(all []*v1.Node) (key uint64, ok bool) {
	var sum, xor uint64
	var h maphash.Hash
	h.SetSeed(v.seed)
	n := 0
	for _, node := range all {
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
		x := h.Sum64()
		sum += x
		xor ^= x
		n++
	}
	return sum ^ bits.RotateLeft64(xor, 32) ^ uint64(n), true
}
