package multislb

import (
	"hash/maphash"
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

// listKey identifies all by its nodes' names and resource versions (membership.NodeListKey).
func (v *nodeViews) listKey(all []*v1.Node) (key uint64, ok bool) {
	return membership.NodeListKey(v.seed, all)
}
