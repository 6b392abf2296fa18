// Package migration moves a cluster from Basic to Standard load balancers:
// the operator sets loadBalancerSku to Standard and restarts the CCM, which, once per start and
// before any service reconcile, decouples the nodes from the Basic pools, deletes the Basic load
// balancers, upgrades their public IPs in place to Standard and hands every LoadBalancer service
// to the Standard path with its IP unchanged.
//
// Build is the pure planner: from what Azure holds and the services it returns ordered,
// idempotent steps. The executor (Run) reads Azure, plans, runs one phase, and re-plans after any
// failure or restart, so a crash at any point resumes from what Azure and the services' status
// say, never from memory.
package migration

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// Phase is one stage of the migration. Phases run in this order; every step of a phase is
// independent of the others in it (they run concurrently).
type Phase int

// The phases, in order. The order keeps the downtime window (a service's Basic frontend gone →
// its Standard rule in place) to the public IP upgrade plus one load balancer write: everything
// that can be done while the Basic load balancers still serve is done first.
const (
	// PhaseStaticPIPs makes Dynamic Basic public IPs of the Basic frontends Static while they are
	// still associated: a Dynamic address is released when its frontend goes (ARM requires a
	// Basic IP to be Static before the SKU upgrade anyway).
	PhaseStaticPIPs Phase = iota + 1
	// PhaseDetachModels removes the Basic pools from scale set models (no new instance joins).
	PhaseDetachModels
	// PhaseDetachNodes removes the Basic pools from NIC and scale set VM ip configurations
	// (Azure refuses to delete a load balancer whose pools are referenced).
	PhaseDetachNodes
	// PhaseDeleteLBs deletes the Basic load balancers: their public IPs and private addresses
	// are free from here on. The downtime window opens.
	PhaseDeleteLBs
	// PhaseUpgradePIPs upgrades the freed Basic public IPs in place to Standard (Static): the
	// address stays.
	PhaseUpgradePIPs
	// PhaseHandOff gives every service to the Standard path: internal ones pinned to their old
	// private address, all nodes joining the Standard pools. The window closes per service.
	PhaseHandOff
)

var phaseNames = map[Phase]string{
	PhaseStaticPIPs: "static-pips", PhaseDetachModels: "detach-models", PhaseDetachNodes: "detach-nodes",
	PhaseDeleteLBs: "delete-lbs", PhaseUpgradePIPs: "upgrade-pips", PhaseHandOff: "hand-off",
}

// Phases lists every phase in order.
func Phases() []Phase {
	return []Phase{PhaseStaticPIPs, PhaseDetachModels, PhaseDetachNodes, PhaseDeleteLBs, PhaseUpgradePIPs, PhaseHandOff}
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

// Input is what the planner needs: the cluster's naming, the Azure resources read, and the
// services.
type Input struct {
	// ClusterName names the backend pools and public IPs (--cluster-name).
	ClusterName string
	// LBNamePrefix is azure.json loadBalancerName, else the cluster name: Basic load balancers
	// named <prefix> and <prefix>-internal belong to the cluster.
	LBNamePrefix string
	// VMSets are the names of the cluster nodes' availability sets and scale sets: the Basic mode
	// named the load balancers of non-primary VM sets after them.
	VMSets []string
	// LoadBalancers of the load balancer resource group.
	LoadBalancers []*armnetwork.LoadBalancer
	// PublicIPs of every resource group the services' public IPs live in.
	PublicIPs []*armnetwork.PublicIPAddress
	// ScaleSets are the scale set models of the node resource groups.
	ScaleSets []*armcompute.VirtualMachineScaleSet
	// Services are the cluster's services (any type; others are ignored).
	Services []*v1.Service
}

// Step is one idempotent action.
type Step struct {
	Phase Phase
	// Target is the Azure resource ID written (the load balancer, public IP, scale set, NIC or
	// scale set VM), or the service key for PhaseHandOff.
	Target string
	// Edit is the NIC or scale set VM change (PhaseDetachNodes).
	Edit *membership.Edit
	// PoolIDs are removed from the scale set model (PhaseDetachModels).
	PoolIDs []string
	// Service is the service handed off (PhaseHandOff).
	Service *ServicePlan
}

// ServicePlan is one service's part of the migration.
type ServicePlan struct {
	Key      string
	Svc      *v1.Service
	Internal bool
	// IPs are the addresses of the service's status: they must stay.
	IPs []netip.Addr
	// PublicIPIDs hold the IPs of a public service (lower-case IDs).
	PublicIPIDs []string
	// BasicLB is the Basic load balancer serving the service now ("" if none).
	BasicLB string
	// OnStandard: the Standard load balancer of its kind has frontends of the service already
	// (its address is then left to the Standard path, never pinned to the status).
	OnStandard bool
	// Warnings about this service (also in Plan.Warnings), sent as events.
	Warnings []string
}

// Plan is the ordered migration.
type Plan struct {
	// BasicLBs are the IDs of the Basic load balancers owned by the cluster.
	BasicLBs []string
	Steps    []Step
	// Services handed to the Standard path.
	Services []*ServicePlan
	// Warnings are conditions the operator should know (logged and sent as events).
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

// Build plans the migration. It is deterministic and idempotent: applied to the Azure state a
// finished migration leaves, it returns an empty plan; applied to any state in between, it
// returns the steps that are left.
func Build(in Input) *Plan {
	p := &Plan{}
	prefix := in.LBNamePrefix
	if prefix == "" {
		prefix = in.ClusterName
	}
	owned := ownedNames(prefix, in.VMSets)
	var basic []*armnetwork.LoadBalancer
	for _, lb := range in.LoadBalancers {
		if lb == nil || lb.ID == nil || !isBasic(lb) {
			continue
		}
		if owned[strings.ToLower(strings.TrimSuffix(strings.ToLower(str(lb.Name)), naming.InternalLBSuffix))] {
			basic = append(basic, lb)
		}
	}
	sort.Slice(basic, func(i, j int) bool { return strings.ToLower(*basic[i].ID) < strings.ToLower(*basic[j].ID) })
	basicIDs := map[string]bool{}
	for _, lb := range basic {
		p.BasicLBs = append(p.BasicLBs, *lb.ID)
		basicIDs[strings.ToLower(*lb.ID)] = true
	}
	pips := map[string]*armnetwork.PublicIPAddress{}
	for _, ip := range in.PublicIPs {
		if ip != nil && ip.ID != nil {
			pips[strings.ToLower(*ip.ID)] = ip
		}
	}

	// Public IPs on the Basic frontends: made Static now, upgraded once freed.
	upgrade := map[string]bool{}
	for _, lb := range basic {
		for _, fe := range frontends(lb) {
			if fe.Properties == nil || fe.Properties.PublicIPAddress == nil {
				continue
			}
			id := strings.ToLower(str(fe.Properties.PublicIPAddress.ID))
			ip := pips[id]
			if ip == nil {
				p.Warnings = append(p.Warnings, fmt.Sprintf("public IP %s of load balancer %s was not found; it is left alone", id, str(lb.Name)))
				continue
			}
			upgrade[id] = true
			if isDynamic(ip) {
				p.Steps = append(p.Steps, Step{Phase: PhaseStaticPIPs, Target: str(ip.ID)})
			}
		}
	}

	// Nodes: every member of every pool of the Basic load balancers leaves it.
	var pools []membership.Pool
	var poolIDs []string
	for _, lb := range basic {
		for _, bp := range poolsOf(lb) {
			id := str(bp.ID)
			if id == "" {
				id = *lb.ID + "/backendAddressPools/" + str(bp.Name)
			}
			poolIDs = append(poolIDs, id)
			mp := membership.Pool{ID: id}
			if bp.Properties != nil {
				for _, r := range bp.Properties.BackendIPConfigurations {
					if r != nil && r.ID != nil {
						mp.Current = append(mp.Current, *r.ID)
					}
				}
			}
			pools = append(pools, mp)
		}
	}
	sortedSets := slices.Clone(in.ScaleSets)
	sort.Slice(sortedSets, func(i, j int) bool {
		return strings.ToLower(str(sortedSets[i].ID)) < strings.ToLower(str(sortedSets[j].ID))
	})
	for _, ss := range sortedSets {
		if ss == nil || ss.ID == nil {
			continue
		}
		var in []string
		for _, id := range poolIDs {
			if membership.ModelHasPool(ss, id) {
				in = append(in, id)
			}
		}
		if len(in) > 0 {
			p.Steps = append(p.Steps, Step{Phase: PhaseDetachModels, Target: *ss.ID, PoolIDs: in})
		}
	}
	edits, skipped := membership.Plan(pools, true)
	for i := range edits {
		e := edits[i]
		p.Steps = append(p.Steps, Step{Phase: PhaseDetachNodes, Target: e.Owner, Edit: &e})
	}
	if len(skipped) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("backend pool members that are neither NIC nor scale set VM ip configurations are not detached: %s", strings.Join(skipped, ", ")))
	}
	for _, lb := range basic {
		p.Steps = append(p.Steps, Step{Phase: PhaseDeleteLBs, Target: *lb.ID})
	}

	// Services: where they are, which IPs they keep.
	stdInternal, stdPublic := standardLB(in.LoadBalancers, prefix, true), standardLB(in.LoadBalancers, prefix, false)
	svcs := slices.Clone(in.Services)
	sort.Slice(svcs, func(i, j int) bool { return key(svcs[i]) < key(svcs[j]) })
	for _, svc := range svcs {
		sp := servicePlan(svc, basic, pips)
		if sp == nil {
			continue
		}
		std := stdPublic
		if sp.Internal {
			std = stdInternal
		}
		onStandard := servedAt(std, naming.ServiceLBName(svc.UID), sp, pips)
		sp.OnStandard = std != nil && len(serviceFrontends(std, naming.ServiceLBName(svc.UID))) > 0
		basicPIP := false
		for _, id := range sp.PublicIPIDs {
			if ip := pips[id]; ip != nil && isBasicPIP(ip) {
				basicPIP = true
				// A Basic IP of a service that its (already deleted) Basic frontend left behind
				// after a crash: still upgraded, if nothing else holds it.
				if ipConfigOwner(ip) == "" || basicIDs[lbOfIPConfig(ipConfigOwner(ip))] {
					upgrade[id] = true
				} else {
					p.Warnings = append(p.Warnings, fmt.Sprintf("service %s: public IP %s is Basic and used by %s, which is not a Basic load balancer of the cluster; it is not upgraded", sp.Key, str(ip.Name), ipConfigOwner(ip)))
				}
			}
		}
		if sp.BasicLB == "" && onStandard && !basicPIP {
			continue
		}
		if !sp.Internal && len(sp.PublicIPIDs) == 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("service %s: no public IP holds its address %v; the Standard path will choose one", sp.Key, sp.IPs))
		}
		if w := pipNameWarning(in.ClusterName, sp, pips); w != "" {
			p.Warnings = append(p.Warnings, w)
			sp.Warnings = append(sp.Warnings, w)
		}
		p.Services = append(p.Services, sp)
	}
	ids := make([]string, 0, len(upgrade))
	for id := range upgrade {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if ip := pips[id]; ip != nil && isBasicPIP(ip) {
			p.Steps = append(p.Steps, Step{Phase: PhaseUpgradePIPs, Target: str(ip.ID)})
		}
	}
	// Hand-off only when there is a migration: a Basic load balancer or IP still in the way, or
	// an internal service whose address no frontend holds (its Basic load balancer is gone).
	needed := len(p.Steps) > 0
	for _, sp := range p.Services {
		if sp.Internal && len(sp.IPs) > 0 && sp.BasicLB == "" && !sp.OnStandard && !heldByFrontend(in.LoadBalancers, sp.IPs) {
			needed = true
		}
	}
	if !needed {
		p.Services = nil
		return p
	}
	for _, sp := range p.Services {
		p.Steps = append(p.Steps, Step{Phase: PhaseHandOff, Target: sp.Key, Service: sp})
	}
	return p
}

// ownedNames are the lower-cased load balancer names (without -internal) of the cluster.
func ownedNames(prefix string, vmSets []string) map[string]bool {
	out := map[string]bool{strings.ToLower(prefix): true}
	for _, s := range vmSets {
		if s != "" {
			out[strings.ToLower(s)] = true
		}
	}
	return out
}

func key(svc *v1.Service) string { return naming.ServiceKey(svc.Namespace, svc.Name) }

// servicePlan is the service's part, or nil for services the migration does not touch (not a
// LoadBalancer of this provider, being deleted, or without an IP yet).
func servicePlan(svc *v1.Service, basic []*armnetwork.LoadBalancer, pips map[string]*armnetwork.PublicIPAddress) *ServicePlan {
	if svc == nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
		return nil
	}
	if c := svc.Spec.LoadBalancerClass; c != nil && *c != "service.k8s.io/azure" {
		return nil
	}
	sp := &ServicePlan{Key: key(svc), Svc: svc,
		Internal: strings.EqualFold(strings.TrimSpace(svc.Annotations[annotations.Internal]), "true")}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil {
			sp.IPs = append(sp.IPs, a.Unmap())
		}
	}
	svcName := naming.ServiceLBName(svc.UID)
	for _, lb := range basic {
		if owns(lb, svcName) {
			sp.BasicLB = *lb.ID
			for _, fe := range serviceFrontends(lb, svcName) {
				if fe.Properties != nil && fe.Properties.PublicIPAddress != nil {
					sp.PublicIPIDs = appendUnique(sp.PublicIPIDs, strings.ToLower(str(fe.Properties.PublicIPAddress.ID)))
				}
			}
		}
	}
	if len(sp.IPs) == 0 && sp.BasicLB == "" {
		return nil
	}
	if !sp.Internal {
		// After a crash the Basic frontend may be gone: the status address finds the IP.
		for id, ip := range pips {
			if a, ok := addr(ip.Properties); ok && slices.Contains(sp.IPs, a) {
				sp.PublicIPIDs = appendUnique(sp.PublicIPIDs, id)
			}
		}
		sort.Strings(sp.PublicIPIDs)
	}
	return sp
}

// servedAt reports whether lb has the service's frontends with all of its status addresses.
func servedAt(lb *armnetwork.LoadBalancer, svcName string, sp *ServicePlan, pips map[string]*armnetwork.PublicIPAddress) bool {
	if lb == nil {
		return false
	}
	fes := serviceFrontends(lb, svcName)
	if len(fes) == 0 {
		return false
	}
	have := map[netip.Addr]bool{}
	for _, fe := range fes {
		if fe.Properties == nil {
			continue
		}
		if fe.Properties.PublicIPAddress != nil {
			if a, ok := addr(pipProps(pips[strings.ToLower(str(fe.Properties.PublicIPAddress.ID))])); ok {
				have[a] = true
			}
			continue
		}
		if a, err := netip.ParseAddr(str(fe.Properties.PrivateIPAddress)); err == nil {
			have[a.Unmap()] = true
		}
	}
	for _, a := range sp.IPs {
		if !have[a] {
			return false
		}
	}
	return true
}

// heldByFrontend reports whether any load balancer frontend holds one of the addresses.
func heldByFrontend(lbs []*armnetwork.LoadBalancer, ips []netip.Addr) bool {
	for _, lb := range lbs {
		for _, fe := range frontends(lb) {
			if fe.Properties == nil {
				continue
			}
			if a, err := netip.ParseAddr(str(fe.Properties.PrivateIPAddress)); err == nil && slices.Contains(ips, a.Unmap()) {
				return true
			}
		}
	}
	return false
}

func standardLB(lbs []*armnetwork.LoadBalancer, prefix string, internal bool) *armnetwork.LoadBalancer {
	name := naming.LoadBalancerName(prefix, internal)
	for _, lb := range lbs {
		if lb != nil && strings.EqualFold(str(lb.Name), name) && !isBasic(lb) {
			return lb
		}
	}
	return nil
}

// owns: a frontend named after the service, or rules of its own (a service sharing another's IP).
func owns(lb *armnetwork.LoadBalancer, svcName string) bool {
	for _, fe := range frontends(lb) {
		if naming.OwnedByService(svcName, str(fe.Name)) {
			return true
		}
	}
	if lb.Properties != nil {
		for _, r := range lb.Properties.LoadBalancingRules {
			if naming.OwnedByService(svcName, str(r.Name)) {
				return true
			}
		}
	}
	return false
}

// serviceFrontends are the frontends named after the service or used by its rules.
func serviceFrontends(lb *armnetwork.LoadBalancer, svcName string) []*armnetwork.FrontendIPConfiguration {
	used := map[string]bool{}
	if lb.Properties != nil {
		for _, r := range lb.Properties.LoadBalancingRules {
			if naming.OwnedByService(svcName, str(r.Name)) && r.Properties != nil && r.Properties.FrontendIPConfiguration != nil {
				used[strings.ToLower(azureid.Name(str(r.Properties.FrontendIPConfiguration.ID)))] = true
			}
		}
	}
	var out []*armnetwork.FrontendIPConfiguration
	for _, fe := range frontends(lb) {
		if used[strings.ToLower(str(fe.Name))] || naming.OwnedByService(svcName, str(fe.Name)) {
			out = append(out, fe)
		}
	}
	return out
}

func frontends(lb *armnetwork.LoadBalancer) []*armnetwork.FrontendIPConfiguration {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	return lb.Properties.FrontendIPConfigurations
}

func poolsOf(lb *armnetwork.LoadBalancer) []*armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	return lb.Properties.BackendAddressPools
}

func isBasic(lb *armnetwork.LoadBalancer) bool {
	// ARM's default SKU is Basic.
	return lb.SKU == nil || lb.SKU.Name == nil || strings.EqualFold(string(*lb.SKU.Name), string(armnetwork.LoadBalancerSKUNameBasic))
}

func isBasicPIP(ip *armnetwork.PublicIPAddress) bool {
	return ip.SKU == nil || ip.SKU.Name == nil || strings.EqualFold(string(*ip.SKU.Name), string(armnetwork.PublicIPAddressSKUNameBasic))
}

func isDynamic(ip *armnetwork.PublicIPAddress) bool {
	return ip.Properties != nil && ip.Properties.PublicIPAllocationMethod != nil &&
		*ip.Properties.PublicIPAllocationMethod == armnetwork.IPAllocationMethodDynamic
}

func ipConfigOwner(ip *armnetwork.PublicIPAddress) string {
	if ip.Properties == nil || ip.Properties.IPConfiguration == nil {
		return ""
	}
	return str(ip.Properties.IPConfiguration.ID)
}

// lbOfIPConfig is the lower-case load balancer ID of a frontend ID ("" for anything else).
func lbOfIPConfig(id string) string {
	l := strings.ToLower(id)
	if i := strings.Index(l, "/frontendipconfigurations/"); i >= 0 && strings.Contains(l, "/loadbalancers/") {
		return l[:i]
	}
	return ""
}

func pipProps(ip *armnetwork.PublicIPAddress) *armnetwork.PublicIPAddressPropertiesFormat {
	if ip == nil {
		return nil
	}
	return ip.Properties
}

func addr(p *armnetwork.PublicIPAddressPropertiesFormat) (netip.Addr, bool) {
	if p == nil || p.IPAddress == nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(*p.IPAddress)
	return a.Unmap(), err == nil
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// pipNameWarning: the Standard path finds a public service's IP by the pip-name annotation, by
// the requested address, or by its own name <cluster>-a<uid>. A Basic IP of another name would be
// replaced (and, being tagged for the service, released) by the Standard path after the
// migration: the operator must name it with the annotation first.
func pipNameWarning(clusterName string, sp *ServicePlan, pips map[string]*armnetwork.PublicIPAddress) string {
	svc := sp.Svc
	if sp.Internal || len(sp.PublicIPIDs) == 0 || naming.IsDualStack(svc) ||
		strings.TrimSpace(svc.Annotations[annotations.PIPName]) != "" || strings.TrimSpace(svc.Annotations[annotations.IPv4]) != "" ||
		strings.TrimSpace(svc.Spec.LoadBalancerIP) != "" {
		return ""
	}
	want := naming.PublicIPName(clusterName, naming.ServiceLBName(svc.UID), "", false, naming.IPv4)
	for _, id := range sp.PublicIPIDs {
		if strings.EqualFold(azureid.Name(id), want) {
			return ""
		}
	}
	name := azureid.Name(sp.PublicIPIDs[0])
	if ip := pips[sp.PublicIPIDs[0]]; ip != nil {
		name = str(ip.Name)
	}
	return fmt.Sprintf("service %s: its public IP %s is not named %s, so the Standard path would replace it; annotate the service with %s=%s to keep it",
		sp.Key, name, want, annotations.PIPName, name)
}
