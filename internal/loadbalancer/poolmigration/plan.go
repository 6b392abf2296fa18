// Package poolmigration moves the cluster's backend pools from NIC-based (nodeIPConfiguration)
// to IP-based (nodeIP) membership, when azure.json says nodeIP and a cluster pool still has
// ip configurations in it. Azure keeps a pool either NIC-based or IP-based, never both, so the
// move keeps every node serving by handing the rules to a staging pool first:
//
//  1. stage: one load balancer write adds the staging pool <pool>_ip-migration holding the
//     members' addresses and points every rule (and outbound rule) of the pool at it;
//  2. the pool leaves the scale set models, then every NIC and scale set instance (the staging
//     pool serves meanwhile);
//  3. finish: one load balancer write gives the emptied pool the staging pool's addresses,
//     points the rules back at it and drops the staging pool.
//
// With enableMigrateToIPBasedBackendPoolAPI the load balancer's migrateToIpBased call converts
// the pools in place instead, and the references it leaves on scale set models and instances are
// removed afterwards, as the existing provider does.
//
// Build is the pure planner: from what Azure holds it returns the steps left. The executor (Run)
// reads, plans, runs the phases and re-plans after every failure or restart, so a crash at any
// point resumes from Azure's state.
package poolmigration

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// maxPoolName is the longest backend pool name Azure accepts.
const maxPoolName = 80

// Phase is one stage of the migration. Phases run in this order; the steps of one phase are
// independent of each other.
type Phase int

// The phases, in order.
const (
	// PhaseStage adds the staging pools and hands them the rules (one write per load balancer).
	PhaseStage Phase = iota + 1
	// PhaseMigrateAPI calls migrateToIpBased (enableMigrateToIPBasedBackendPoolAPI).
	PhaseMigrateAPI
	// PhaseDetachModels removes the pools from scale set models (no new instance joins).
	PhaseDetachModels
	// PhaseDetachNodes removes the pools from NIC and scale set instance ip configurations.
	PhaseDetachNodes
	// PhaseFinish fills the emptied pools with the addresses, hands them the rules back and
	// drops the staging pools (one write per load balancer).
	PhaseFinish
)

var phaseNames = map[Phase]string{PhaseStage: "stage", PhaseMigrateAPI: "migrate-api", PhaseDetachModels: "detach-models",
	PhaseDetachNodes: "detach-nodes", PhaseFinish: "finish"}

// Phases lists every phase in order.
func Phases() []Phase {
	return []Phase{PhaseStage, PhaseMigrateAPI, PhaseDetachModels, PhaseDetachNodes, PhaseFinish}
}

func (p Phase) String() string {
	if n, ok := phaseNames[p]; ok {
		return n
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// ParsePhase is the inverse of String.
func ParsePhase(s string) (Phase, bool) {
	for p, n := range phaseNames {
		if strings.EqualFold(n, strings.TrimSpace(s)) {
			return p, true
		}
	}
	return 0, false
}

// Node is a cluster node with the ip configurations of its VM (to name the address entries of
// the pools' members).
type Node struct {
	Node      *v1.Node
	IPConfigs []string
}

// Input is what the planner needs.
type Input struct {
	// ClusterName names the cluster pools (<cluster>, <cluster>-IPv6).
	ClusterName string
	// UseAPI is enableMigrateToIPBasedBackendPoolAPI.
	UseAPI bool
	// LoadBalancers are the cluster's load balancers whose pools the CCM manages.
	LoadBalancers []*armnetwork.LoadBalancer
	// ScaleSets are the scale set models of the node resource groups.
	ScaleSets []*armcompute.VirtualMachineScaleSet
	// Refs are the backend pools every NIC and scale set instance ip configuration references,
	// read from the NICs themselves (ip configuration ID → pool IDs): a reference that is no
	// membership any more (left by migrateToIpBased) shows only there.
	Refs map[string][]string
	// Nodes are the cluster's nodes.
	Nodes []Node
}

// PoolStep is one cluster pool of a load balancer step.
type PoolStep struct {
	// Pool and Staging are pool names.
	Pool, Staging string
	// Entries are the staging pool's addresses (address → entry name), PhaseStage only.
	Entries map[string]string
}

// Step is one idempotent action.
type Step struct {
	Phase Phase
	// Target is the resource written: the load balancer, scale set, NIC or scale set VM ID.
	Target string
	// Pools are the load balancer's pools (PhaseStage, PhaseMigrateAPI, PhaseFinish).
	Pools []PoolStep
	// PoolIDs leave the scale set model (PhaseDetachModels).
	PoolIDs []string
	// Edit is the NIC or scale set VM change (PhaseDetachNodes).
	Edit *membership.Edit
}

// Plan is the ordered migration.
type Plan struct {
	Steps []Step
	// LoadBalancers being migrated (IDs).
	LoadBalancers []string
	// Warnings for the operator (logged and sent as events).
	Warnings []string
}

// Needed reports whether anything is left to do.
func (p *Plan) Needed() bool { return len(p.Steps) > 0 }

// Of returns the steps of one phase.
func (p *Plan) Of(ph Phase) []Step {
	var out []Step
	for _, s := range p.Steps {
		if s.Phase == ph {
			out = append(out, s)
		}
	}
	return out
}

// Counts are the number of steps per phase, for logs.
func (p *Plan) Counts() map[string]int {
	out := map[string]int{}
	for _, s := range p.Steps {
		out[s.Phase.String()]++
	}
	return out
}

// Build plans the migration. It is deterministic and idempotent: on a finished migration it
// returns an empty plan, on any state in between the steps that are left.
func Build(in Input) *Plan {
	p := &Plan{}
	nodeOf := map[string]*v1.Node{}
	for _, n := range in.Nodes {
		for _, id := range n.IPConfigs {
			nodeOf[strings.ToLower(id)] = n.Node
		}
	}
	refsTo := map[string][]string{} // pool ID (lower) → ip configuration IDs referencing it
	for _, ipc := range slices.Sorted(maps.Keys(in.Refs)) {
		for _, pool := range in.Refs[ipc] {
			refsTo[strings.ToLower(pool)] = append(refsTo[strings.ToLower(pool)], ipc)
		}
	}
	lbs := slices.Clone(in.LoadBalancers)
	sort.Slice(lbs, func(i, j int) bool { return strings.ToLower(str(lbs[i].ID)) < strings.ToLower(str(lbs[j].ID)) })
	var detach []membership.Pool
	var migratedPoolIDs []string
	for _, lb := range lbs {
		if lb == nil || lb.ID == nil || lb.Properties == nil {
			continue
		}
		var stage, api, finish []PoolStep
		touched := false
		for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
			name := naming.BackendPoolName(in.ClusterName, fam)
			pool := findPool(lb, name)
			if pool == nil {
				continue
			}
			id := poolID(lb, pool)
			staging := findPool(lb, naming.MigrationPoolName(name))
			members := backRefs(pool)
			refs := union(members, refsTo[strings.ToLower(id)])
			modelRefs := false
			for _, ss := range in.ScaleSets {
				modelRefs = modelRefs || membership.ModelHasPool(ss, id)
			}
			nicBased := len(members) > 0
			if !nicBased && staging == nil && len(refs) == 0 && !modelRefs {
				continue // IP-based (or empty) and nothing references it: done
			}
			if nicBased && staging == nil && !in.UseAPI && len(naming.MigrationPoolName(name)) > maxPoolName {
				p.Warnings = append(p.Warnings, fmt.Sprintf("load balancer %s: backend pool %s is not migrated: its staging pool's name %s is longer than Azure's %d characters; set enableMigrateToIPBasedBackendPoolAPI to migrate it in place",
					str(lb.Name), name, naming.MigrationPoolName(name), maxPoolName))
				continue
			}
			if nat := natRulesOn(lb, id); len(nat) > 0 && staging == nil && nicBased {
				p.Warnings = append(p.Warnings, fmt.Sprintf("load balancer %s: backend pool %s is used by inbound NAT rules %s, which cannot use an IP-based pool; it is not migrated",
					str(lb.Name), name, strings.Join(nat, ", ")))
				continue
			}
			ps := PoolStep{Pool: name, Staging: naming.MigrationPoolName(name)}
			switch {
			case staging != nil:
				// A migration through the staging pool is under way: finish it whatever the
				// configuration says now.
				if usesPool(lb, id) {
					stage = append(stage, ps) // rules to hand over again (idempotent)
				}
				// After the detach phases of this round; the executor checks the pool has no
				// member left before it hands the rules back.
				finish = append(finish, ps)
			case nicBased && in.UseAPI:
				api = append(api, ps)
			case nicBased:
				finish = append(finish, ps) // the staging pool's addresses, read when finishing
				ps.Entries = entries(members, nodeOf, fam, &p.Warnings, name)
				stage = append(stage, ps)
			}
			detach = append(detach, membership.Pool{ID: id, Current: refs})
			migratedPoolIDs = append(migratedPoolIDs, id)
			touched = true
		}
		if touched {
			p.LoadBalancers = append(p.LoadBalancers, *lb.ID)
		}
		if len(stage) > 0 {
			p.Steps = append(p.Steps, Step{Phase: PhaseStage, Target: *lb.ID, Pools: stage})
		}
		if len(api) > 0 {
			p.Steps = append(p.Steps, Step{Phase: PhaseMigrateAPI, Target: *lb.ID, Pools: api})
		}
		if len(finish) > 0 {
			p.Steps = append(p.Steps, Step{Phase: PhaseFinish, Target: *lb.ID, Pools: finish})
		}
	}
	sets := slices.Clone(in.ScaleSets)
	sort.Slice(sets, func(i, j int) bool { return strings.ToLower(str(sets[i].ID)) < strings.ToLower(str(sets[j].ID)) })
	for _, ss := range sets {
		if ss == nil || ss.ID == nil {
			continue
		}
		var in []string
		for _, id := range migratedPoolIDs {
			if membership.ModelHasPool(ss, id) {
				in = append(in, id)
			}
		}
		if len(in) > 0 {
			p.Steps = append(p.Steps, Step{Phase: PhaseDetachModels, Target: *ss.ID, PoolIDs: in})
		}
	}
	edits, skipped := membership.Plan(detach, true)
	for i := range edits {
		e := edits[i]
		p.Steps = append(p.Steps, Step{Phase: PhaseDetachNodes, Target: e.Owner, Edit: &e})
	}
	if len(skipped) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("backend pool members that are neither NIC nor scale set VM ip configurations are not detached: %s", strings.Join(skipped, ", ")))
	}
	// Finishing waits for the members to leave: when detaching is planned the finish of the same
	// round only runs if the detach succeeded; the executor checks the pool is empty anyway.
	sort.SliceStable(p.Steps, func(i, j int) bool { return p.Steps[i].Phase < p.Steps[j].Phase })
	return p
}

// entries are the staging pool's addresses: the InternalIPs of family fam of the nodes whose ip
// configurations are members. A member that is no node's is reported and left out (its pool
// reference is removed like the others).
func entries(members []string, nodeOf map[string]*v1.Node, fam naming.Family, warnings *[]string, pool string) map[string]string {
	var nodes []*v1.Node
	seen := map[string]bool{}
	var unknown []string
	for _, m := range members {
		n := nodeOf[strings.ToLower(m)]
		if n == nil {
			unknown = append(unknown, m)
			continue
		}
		if !seen[n.Name] {
			seen[n.Name] = true
			nodes = append(nodes, n)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	if len(unknown) > 0 {
		*warnings = append(*warnings, fmt.Sprintf("backend pool %s: members that are no node of the cluster leave it: %s", pool, strings.Join(unknown, ", ")))
	}
	return membership.AddressEntries(nodes, fam)
}

// usesPool reports whether a rule or outbound rule of lb uses the pool.
func usesPool(lb *armnetwork.LoadBalancer, id string) bool {
	for _, r := range lb.Properties.LoadBalancingRules {
		if r.Properties != nil && (refIs(r.Properties.BackendAddressPool, id) || slices.ContainsFunc(r.Properties.BackendAddressPools, func(s *armnetwork.SubResource) bool { return refIs(s, id) })) {
			return true
		}
	}
	for _, r := range lb.Properties.OutboundRules {
		if r.Properties != nil && refIs(r.Properties.BackendAddressPool, id) {
			return true
		}
	}
	return false
}

// natRulesOn are the inbound NAT rules (pool-based) using the pool.
func natRulesOn(lb *armnetwork.LoadBalancer, id string) []string {
	var out []string
	for _, r := range lb.Properties.InboundNatRules {
		if r.Properties != nil && refIs(r.Properties.BackendAddressPool, id) {
			out = append(out, str(r.Name))
		}
	}
	return out
}

// Retarget points every rule and outbound rule of lb using pool from at pool to (IDs compared
// case-insensitively); it reports a change.
func Retarget(lb *armnetwork.LoadBalancer, from, to string) bool {
	changed := false
	set := func(s *armnetwork.SubResource) {
		if refIs(s, from) {
			s.ID = &to
			changed = true
		}
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if r.Properties == nil {
			continue
		}
		if r.Properties.BackendAddressPool != nil {
			set(r.Properties.BackendAddressPool)
		}
		for _, s := range r.Properties.BackendAddressPools {
			if s != nil {
				set(s)
			}
		}
	}
	for _, r := range lb.Properties.OutboundRules {
		if r.Properties != nil && r.Properties.BackendAddressPool != nil {
			set(r.Properties.BackendAddressPool)
		}
	}
	return changed
}

func refIs(s *armnetwork.SubResource, id string) bool {
	return s != nil && s.ID != nil && strings.EqualFold(*s.ID, id)
}

func findPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if p != nil && strings.EqualFold(str(p.Name), name) {
			return p
		}
	}
	return nil
}

// FindPool is the pool called name on lb (nil when absent).
func FindPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	return findPool(lb, name)
}

// PoolID is the ID of a pool of lb (built from the load balancer's when the model has none).
func PoolID(lb *armnetwork.LoadBalancer, name string) string {
	return str(lb.ID) + "/backendAddressPools/" + name
}

func poolID(lb *armnetwork.LoadBalancer, p *armnetwork.BackendAddressPool) string {
	if p.ID != nil && *p.ID != "" {
		return *p.ID
	}
	return PoolID(lb, str(p.Name))
}

// backRefs are the pool's NIC-based members (backendIPConfigurations).
func backRefs(p *armnetwork.BackendAddressPool) []string {
	var out []string
	if p.Properties != nil {
		for _, r := range p.Properties.BackendIPConfigurations {
			if r != nil && r.ID != nil {
				out = append(out, *r.ID)
			}
		}
	}
	return out
}

// HasNICMembers reports whether the pool has NIC-based members.
func HasNICMembers(p *armnetwork.BackendAddressPool) bool { return p != nil && len(backRefs(p)) > 0 }

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.ContainsFunc(out, func(y string) bool { return strings.EqualFold(x, y) }) {
			out = append(out, x)
		}
	}
	return out
}

// ResourceGroups are the resource groups of the ip configurations (where NICs and scale sets
// are listed from).
func ResourceGroups(ids []string) []string {
	seen := map[string]string{}
	for _, id := range ids {
		if rg := azureid.ResourceGroup(id); rg != "" {
			seen[strings.ToLower(rg)] = rg
		}
	}
	out := slices.Collect(maps.Values(seen))
	sort.Strings(out)
	return out
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
