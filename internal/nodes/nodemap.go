package nodes

import (
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// NodeMap is the informer-maintained view of nodes that lookups by node name need (routes get
// only a node name): resource group (label kubernetes.azure.com/resource-group), on-prem
// flag, addresses. The provider feeds it from the shared node informer's events.
type NodeMap struct {
	mu     sync.RWMutex
	nodes  map[string]*v1.Node
	synced func() bool
}

// NewNodeMap returns an empty map.
func NewNodeMap() *NodeMap { return &NodeMap{nodes: map[string]*v1.Node{}} }

// SetSynced installs the informer's HasSynced, which Synced reports (the provider feeds the map
// from its node informer's events).
func (m *NodeMap) SetSynced(synced func() bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced = synced
}

// Set records a node (the object is shared with the informer and must not be modified).
func (m *NodeMap) Set(n *v1.Node) {
	if n == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[n.Name] = n
}

// Delete forgets a node.
func (m *NodeMap) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodes, name)
}

// Get returns a node by name.
func (m *NodeMap) Get(name string) (*v1.Node, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, ok := m.nodes[name]
	return n, ok
}

// Synced reports whether the informer has delivered its initial list (true without informer).
func (m *NodeMap) Synced() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.synced == nil || m.synced()
}

// ResourceGroups returns def plus every resource group named by a node label, lower case, sorted.
func (m *NodeMap) ResourceGroups(def string) []string {
	set := map[string]bool{strings.ToLower(def): true}
	m.mu.RLock()
	for _, n := range m.nodes {
		if rg := n.Labels[LabelResourceGroup]; rg != "" {
			set[strings.ToLower(rg)] = true
		}
	}
	m.mu.RUnlock()
	out := make([]string, 0, len(set))
	for rg := range set {
		out = append(out, rg)
	}
	sort.Strings(out)
	return out
}

// ResourceGroupOf returns the resource group of a node by name (label, else def).
func (m *NodeMap) ResourceGroupOf(name, def string) string {
	n, _ := m.Get(name)
	return ResourceGroupOf(n, def)
}

// IsUnmanaged reports an on-prem node by name.
func (m *NodeMap) IsUnmanaged(name string) bool {
	n, ok := m.Get(name)
	return ok && IsUnmanaged(n)
}
