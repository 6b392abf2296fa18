package placement

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// LabelAgentPool names a node's agent pool; it is the node's VM set when its provider ID names
// no scale set (availability-set and Flexible scale set VMs).
const LabelAgentPool = "kubernetes.azure.com/agentpool"

// VMSetOf is the node's scale set (from its provider ID) or, failing that, its agent pool label.
func VMSetOf(n *v1.Node) string {
	if id, err := nodes.ParseProviderID(n.Spec.ProviderID); err == nil && id.ScaleSet != "" {
		return id.ScaleSet
	}
	return n.Labels[LabelAgentPool]
}

// HeldPool is a configuration's cluster pool as Azure has it: the addresses it holds.
type HeldPool struct {
	Config    string
	Addresses []string
}

// NodeInputs describes nodes for PlaceNodes. A node's current configuration is the one the last
// placement gave it (previous, by node name), else the configuration whose cluster pool holds one
// of its addresses (the first pool listing an address wins), else none: so a node keeps its
// place across restarts, and while its load balancer is still being created.
func NodeInputs(eligible []*v1.Node, previous map[string]string, pools []HeldPool, addresses func(*v1.Node) []string) []Node {
	holder := map[string]string{}
	for _, p := range pools {
		for _, a := range p.Addresses {
			if _, ok := holder[a]; !ok {
				holder[a] = p.Config
			}
		}
	}
	out := make([]Node, 0, len(eligible))
	for _, n := range eligible {
		cur := previous[n.Name]
		if cur == "" {
			for _, a := range addresses(n) {
				if cfg, ok := holder[a]; ok {
					cur = cfg
					break
				}
			}
		}
		out = append(out, Node{Name: n.Name, Labels: n.Labels, VMSet: VMSetOf(n), Current: cur})
	}
	return out
}

// LBExists says whether a configured load balancer exists.
type LBExists struct {
	Name   string
	Exists bool
}

// Fingerprint hashes what node placement depends on: which configured load balancers exist and
// the eligible nodes (nodes: their NodesFingerprint). Rule changes (new ETags) do not count:
// they leave the pools alone. Equal fingerprints mean a placement pass would write nothing new.
func Fingerprint(lbs []LBExists, nodes uint64) uint64 {
	h := fnv.New64a()
	for _, lb := range lbs {
		_, _ = h.Write([]byte(lb.Name))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(strconv.FormatBool(lb.Exists)))
		_, _ = h.Write([]byte{0})
	}
	_, _ = h.Write(binary.LittleEndian.AppendUint64(nil, nodes))
	return h.Sum64()
}

// NodeLabelKeys are the node labels the configurations' node selectors read, sorted: the only
// labels node placement depends on (besides the agent pool label, through VMSetOf).
func NodeLabelKeys(cfgs []Config) []string {
	var keys []string
	for _, c := range cfgs {
		if c.Nodes == nil {
			continue
		}
		reqs, _ := c.Nodes.Requirements()
		for _, r := range reqs {
			keys = append(keys, r.Key())
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// NodesFingerprint hashes what node placement reads of the eligible nodes, in any order: name,
// VM set, addresses and the labels named by labelKeys (NodeLabelKeys). Other labels change
// often (controllers add and update them) and place no node elsewhere.
func NodesFingerprint(eligible []*v1.Node, labelKeys []string) uint64 {
	h := fnv.New64a()
	put := func(ss ...string) {
		for _, s := range ss {
			_, _ = h.Write([]byte(s))
			_, _ = h.Write([]byte{0})
		}
	}
	// Node lists come from listers, in no particular order.
	sorted := slices.Clone(eligible)
	slices.SortFunc(sorted, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range sorted {
		put(n.Name, VMSetOf(n))
		for _, k := range labelKeys {
			if v, ok := n.Labels[k]; ok {
				put(k, v)
			}
		}
		for _, a := range n.Status.Addresses {
			put(string(a.Type), a.Address)
		}
	}
	return h.Sum64()
}
