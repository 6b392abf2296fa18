// Package adminstate is the pure planner of load balancer backend admin state: which state a
// node's backend entries should carry (Down while the node is draining, None otherwise) and the
// edit of a backend pool model that gets them there. No I/O: the controller
// (internal/controllers/adminstate) reads the cluster and writes pools through the writers.
package planner

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
)

// Draining taints. Either one, with any effect, makes a node draining.
const (
	// TaintOutOfService is the GA taint maintenance tooling adds to a node leaving service.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// TaintDraining with the value TaintDrainingSpotEviction is added by the controller on the
	// first PreemptScheduled event of a node, so the signal survives restarts; operators may set
	// it by hand too.
	TaintDraining             = "cloudprovider.azure.microsoft.com/draining"
	TaintDrainingSpotEviction = "spot-eviction"
)

// State is a backend entry's admin state as this feature manages it.
type State string

const (
	// None lets the health probe decide (the normal state).
	None State = "None"
	// Down stops new connections to the entry; established TCP flows are honoured.
	Down State = "Down"
)

// IsDrainingTaint reports whether t is one of the draining taints. Cordon
// (node.kubernetes.io/unschedulable) is deliberately not one: it flips too often and does not
// mean "take traffic away now".
func IsDrainingTaint(t v1.Taint) bool {
	switch t.Key {
	case TaintOutOfService:
		return true
	case TaintDraining:
		return t.Value == TaintDrainingSpotEviction
	}
	return false
}

// DrainingTaints returns the node's draining taint keys (sorted, deduplicated) — the reason
// shown in logs and events.
func DrainingTaints(n *v1.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, t := range n.Spec.Taints {
		if IsDrainingTaint(t) && !slices.Contains(out, t.Key) {
			out = append(out, t.Key)
		}
	}
	slices.Sort(out)
	return out
}

// Desired is the admin state the node's backend entries should carry.
func Desired(n *v1.Node) State {
	if len(DrainingTaints(n)) > 0 {
		return Down
	}
	return None
}

// HasSpotTaint reports whether the node already carries draining=spot-eviction.
func HasSpotTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == TaintDraining && t.Value == TaintDrainingSpotEviction {
			return true
		}
	}
	return false
}

// Member is one node as the pools know it: its addresses (IP-based pools) and NIC IP
// configuration IDs (NIC-based pools), and the state its entries should carry.
type Member struct {
	Node        string
	IPs         []netip.Addr
	IPConfigIDs []string
	State       State
}

// MemberOf builds the member of a node from its InternalIP addresses; ipConfigIDs are the
// node's NIC IP configurations when the caller knows them (NIC-based pools).
func MemberOf(n *v1.Node, ipConfigIDs []string) Member {
	m := Member{Node: n.Name, State: Desired(n), IPConfigIDs: ipConfigIDs}
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			m.IPs = append(m.IPs, ip.Unmap())
		}
	}
	return m
}

// Change is one entry whose admin state Apply changed.
type Change struct {
	Node  string
	Entry string // entry name, else its address or IP configuration ID
	From  State  // None also when the entry carried no admin state; "" for an added entry
	To    State
}

// Apply sets the admin state of every entry of the members in pool (edited in place) and returns
// what changed (nil when nothing did, so the caller can skip the write).
//
//   - IP-based entries match a member by ipAddress.
//   - NIC-based entries match by properties.networkInterfaceIPConfiguration.id. A NIC-based pool
//     lists its members in backendIPConfigurations; admin state cannot be given at pool creation,
//     so when a Down member has no address entry yet one is added that references its IP
//     configuration.
//   - Entries of nodes not among members are left alone (unknown nodes, deleted nodes: normal
//     reconciliation removes their entries).
//   - Restoring writes an explicit None, and only over Down: a state an operator set by hand
//     (Up) on a node that is not draining stays.
func Apply(pool *armnetwork.BackendAddressPool, members []Member) []Change {
	if pool == nil {
		return nil
	}
	byIP := map[netip.Addr]*Member{}
	byConfig := map[string]*Member{}
	for i := range members {
		m := &members[i]
		for _, ip := range m.IPs {
			byIP[ip.Unmap()] = m
		}
		for _, id := range m.IPConfigIDs {
			byConfig[strings.ToLower(id)] = m
		}
	}
	if pool.Properties == nil {
		pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
	}
	p := pool.Properties
	var changes []Change
	seenConfig := map[string]bool{}
	for _, e := range p.LoadBalancerBackendAddresses {
		if e == nil || e.Properties == nil {
			continue
		}
		m, key := entryMember(e, byIP, byConfig)
		if key != "" {
			seenConfig[key] = true
		}
		if m == nil {
			continue
		}
		cur := stateOf(e.Properties.AdminState)
		next, ok := transition(cur, m.State)
		if !ok {
			continue
		}
		e.Properties.AdminState = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminState(next))
		changes = append(changes, Change{Node: m.Node, Entry: entryName(e), From: cur, To: next})
	}
	// NIC-based members that NRP does not list as address entries yet.
	for _, ref := range p.BackendIPConfigurations {
		if ref == nil || ref.ID == nil {
			continue
		}
		key := strings.ToLower(*ref.ID)
		m := byConfig[key]
		if m == nil || seenConfig[key] || m.State != Down {
			continue
		}
		seenConfig[key] = true
		e := &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(configEntryName(*ref.ID)),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: ref.ID},
				AdminState:                      to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown),
			},
		}
		p.LoadBalancerBackendAddresses = append(p.LoadBalancerBackendAddresses, e)
		changes = append(changes, Change{Node: m.Node, Entry: *e.Name, To: Down})
	}
	return changes
}

// Entries lists the entries of pool that belong to the member, with their current state.
func Entries(pool *armnetwork.BackendAddressPool, m Member) map[string]State {
	out := map[string]State{}
	if pool == nil || pool.Properties == nil {
		return out
	}
	byIP := map[netip.Addr]*Member{}
	byConfig := map[string]*Member{}
	for _, ip := range m.IPs {
		byIP[ip.Unmap()] = &m
	}
	for _, id := range m.IPConfigIDs {
		byConfig[strings.ToLower(id)] = &m
	}
	for _, e := range pool.Properties.LoadBalancerBackendAddresses {
		if e == nil || e.Properties == nil {
			continue
		}
		if owner, _ := entryMember(e, byIP, byConfig); owner != nil {
			out[entryName(e)] = stateOf(e.Properties.AdminState)
		}
	}
	return out
}

// NeedsWrite reports whether Apply would change pool for members, without editing it.
func NeedsWrite(pool *armnetwork.BackendAddressPool, members []Member) bool {
	if pool == nil {
		return false
	}
	cp := *pool
	if pool.Properties != nil {
		props := *pool.Properties
		props.LoadBalancerBackendAddresses = make([]*armnetwork.LoadBalancerBackendAddress, len(pool.Properties.LoadBalancerBackendAddresses))
		for i, e := range pool.Properties.LoadBalancerBackendAddresses {
			if e == nil {
				continue
			}
			ec := *e
			if e.Properties != nil {
				ep := *e.Properties
				ec.Properties = &ep
			}
			props.LoadBalancerBackendAddresses[i] = &ec
		}
		cp.Properties = &props
	}
	return len(Apply(&cp, members)) > 0
}

// transition is the admin state an entry moves to, and whether it moves at all.
func transition(cur, want State) (State, bool) {
	switch want {
	case Down:
		return Down, cur != Down
	default:
		return None, cur == Down
	}
}

func entryMember(e *armnetwork.LoadBalancerBackendAddress, byIP map[netip.Addr]*Member, byConfig map[string]*Member) (*Member, string) {
	props := e.Properties
	if props.NetworkInterfaceIPConfiguration != nil && props.NetworkInterfaceIPConfiguration.ID != nil {
		key := strings.ToLower(*props.NetworkInterfaceIPConfiguration.ID)
		return byConfig[key], key
	}
	if props.IPAddress != nil {
		if ip, err := netip.ParseAddr(*props.IPAddress); err == nil {
			return byIP[ip.Unmap()], ""
		}
	}
	return nil, ""
}

func stateOf(s *armnetwork.LoadBalancerBackendAddressAdminState) State {
	if s == nil || *s == "" {
		return None
	}
	if strings.EqualFold(string(*s), string(Down)) {
		return Down
	}
	if strings.EqualFold(string(*s), string(None)) {
		return None
	}
	return State(*s)
}

func entryName(e *armnetwork.LoadBalancerBackendAddress) string {
	if e.Name != nil && *e.Name != "" {
		return *e.Name
	}
	if e.Properties.IPAddress != nil {
		return *e.Properties.IPAddress
	}
	if r := e.Properties.NetworkInterfaceIPConfiguration; r != nil && r.ID != nil {
		return *r.ID
	}
	return ""
}

// configEntryName names an added NIC entry after its NIC and IP configuration
// (…/networkInterfaces/<nic>/ipConfigurations/<cfg> → <nic>-<cfg>; scale set instance NICs
// include the instance ID so names stay unique in the pool).
func configEntryName(id string) string {
	parts := strings.Split(id, "/")
	var nic, cfg, vm string
	for i := 0; i+1 < len(parts); i++ {
		switch strings.ToLower(parts[i]) {
		case "networkinterfaces":
			nic = parts[i+1]
		case "ipconfigurations":
			cfg = parts[i+1]
		case "virtualmachines":
			vm = parts[i+1]
		}
	}
	name := strings.Trim(strings.Join([]string{nic, vm, cfg}, "-"), "-")
	name = strings.ReplaceAll(name, "--", "-")
	if name == "" {
		return id
	}
	return name
}

// ConfigIndex finds, among NIC IP configuration IDs, those of a node's own NICs where the ID
// shows it: a scale set instance's NIC configurations live under the instance
// (…/virtualMachineScaleSets/<ss>/virtualMachines/<id>/networkInterfaces/…), which is the
// node's providerID. Standalone and availability-set VMs have NICs of their own resource path;
// they match by address instead. An index, because a pool of a 5,000-node cluster has 5,000
// configurations: matching each node against all of them is 25 million comparisons per write.
type ConfigIndex map[string][]string // lower-cased instance ID -> configuration IDs

// NewConfigIndex indexes configuration IDs by their instance (the part before
// /networkInterfaces/); duplicates are dropped.
func NewConfigIndex(configs []string) ConfigIndex {
	idx := ConfigIndex{}
	for _, c := range configs {
		lc := strings.ToLower(c)
		i := strings.Index(lc, "/networkinterfaces/")
		if i < 0 || !strings.Contains(lc[:i], "/virtualmachinescalesets/") {
			continue
		}
		if k := lc[:i]; !slices.Contains(idx[k], c) {
			idx[k] = append(idx[k], c)
		}
	}
	return idx
}

// Of returns the configurations of the scale set instance providerID names (nil for anything
// else).
func (idx ConfigIndex) Of(providerID string) []string {
	if len(idx) == 0 {
		return nil
	}
	id := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(providerID, "azure://"), "/"))
	if id == "" {
		return nil
	}
	return idx[id]
}
