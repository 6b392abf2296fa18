// Package placement decides, with multiple Standard load balancers, which load
// balancer a service and a node belong to. Pure functions of the configuration, the cluster
// objects and the current placement read from Azure: no I/O, table-tested.
//
// Placement is stable: a service or node stays where it is unless it is no longer eligible
// there. The current placement is what Azure holds (the load balancer carrying the service's
// frontend, the load balancer whose cluster pool has the node), so it survives restarts.
package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// InternalSuffix names the internal counterpart of a configured (public) load balancer; both
// share the configuration.
const InternalSuffix = "-internal"

// Config is one compiled multipleStandardLoadBalancerConfigurations entry.
type Config struct {
	Name         string
	PrimaryVMSet string
	// AllowPlacement false: no new service may be placed here (services already here stay).
	AllowPlacement bool
	// AutoPlace false: only services naming this entry in the annotation land here.
	AutoPlace bool
	// Nil selectors select nothing in particular (no restriction / no node preference).
	ServiceLabels     labels.Selector
	ServiceNamespaces labels.Selector
	Nodes             labels.Selector
}

// Compile turns the azure.json entries into Configs (in configuration order).
func Compile(entries []config.MultipleStandardLoadBalancerConfiguration) ([]Config, error) {
	out := make([]Config, 0, len(entries))
	for i, e := range entries {
		c := Config{Name: e.Name, PrimaryVMSet: e.PrimaryVMSet,
			AllowPlacement: e.AllowServicePlacement == nil || *e.AllowServicePlacement,
			AutoPlace:      e.AutoPlaceServices == nil || *e.AutoPlaceServices}
		var err error
		if c.ServiceLabels, err = selector(e.ServiceLabelSelector, false); err != nil {
			return nil, fmt.Errorf("multipleStandardLoadBalancerConfigurations[%d].serviceLabelSelector: %w", i, err)
		}
		if c.ServiceNamespaces, err = selector(e.ServiceNamespaceSelector, false); err != nil {
			return nil, fmt.Errorf("multipleStandardLoadBalancerConfigurations[%d].serviceNamespaceSelector: %w", i, err)
		}
		// An empty node selector is "no selector" (the existing provider's reading).
		if c.Nodes, err = selector(e.NodeSelector, true); err != nil {
			return nil, fmt.Errorf("multipleStandardLoadBalancerConfigurations[%d].nodeSelector: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func selector(s *metav1.LabelSelector, emptyIsNil bool) (labels.Selector, error) {
	if s == nil || (emptyIsNil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0) {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// ConfigName maps a load balancer name to its configuration name (<name>-internal shares the
// configuration of <name>); "" when the load balancer is not configured.
func ConfigName(cfgs []Config, lbName string) string {
	for _, c := range cfgs {
		if strings.EqualFold(c.Name, lbName) || strings.EqualFold(c.Name+InternalSuffix, lbName) {
			return c.Name
		}
	}
	return ""
}

// LBName is the load balancer of configuration name for a public or internal service.
func LBName(name string, internal bool) string {
	if internal {
		return name + InternalSuffix
	}
	return name
}

// Service is what placement needs to know of a service.
type Service struct {
	Key             string // namespace/name
	Labels          map[string]string
	NamespaceLabels map[string]string
	// Requested are the names of the azure-load-balancer-configurations annotation (lower case).
	Requested []string
	// Current is the configuration the service is on now ("" when not placed).
	Current string
	// Full are configurations whose load balancer has no room left for what the service needs
	// (e.g. its private link service), with why. The service stays where it is regardless.
	Full map[string]string
	// Internal: the service is on the internal load balancers (for the names in messages).
	Internal bool
	// PinsIP: the service asks for a given IP (an address, or a public IP by name).
	PinsIP bool
	// Holder is the configuration whose load balancer already carries the IP the service asks
	// for, or its own frontend ("" when none): where the IP is.
	Holder string
	// SharedFrontend is a frontend of the service on its current load balancer that something
	// else uses too, and SharedBy says what (rules of other services, outbound or inbound NAT
	// rules). While set, the frontend cannot leave that load balancer, and so the service
	// cannot either.
	SharedFrontend string
	SharedBy       []string
}

// Decision is where a service goes.
type Decision struct {
	// Name of the chosen configuration.
	Name string
	// Moved: the service was on another configuration that it can no longer use.
	Moved bool
	// From is the configuration it leaves (Moved only).
	From string
}

// NoEligibleError says why no load balancer can take a service.
type NoEligibleError struct {
	Service string
	Reasons []string
}

func (e *NoEligibleError) Error() string {
	return fmt.Sprintf("no load balancer configuration is eligible (%s)", strings.Join(e.Reasons, "; "))
}

// Eligible returns the configurations service s may be on, in configuration order, or why none.
//
//   - the annotation restricts the candidates to the named entries (unknown names are an error
//     when none of them exists);
//   - allowServicePlacement=false keeps only services already there;
//   - autoPlaceServices=false keeps only services that name the entry or are already there;
//   - label and namespace selectors must match; when one does, entries without service
//     selectors are only a fallback.
func Eligible(cfgs []Config, s Service) ([]string, error) {
	cands := cfgs
	if len(s.Requested) > 0 {
		cands = nil
		for _, c := range cfgs {
			if slices.ContainsFunc(s.Requested, func(r string) bool { return strings.EqualFold(r, c.Name) }) {
				cands = append(cands, c)
			}
		}
		if len(cands) == 0 {
			return nil, &NoEligibleError{Service: s.Key, Reasons: []string{fmt.Sprintf(
				"the azure-load-balancer-configurations annotation names %s, none of which is configured", strings.Join(s.Requested, ","))}}
		}
	}
	var out, reasons []string
	for _, c := range cands {
		here := strings.EqualFold(s.Current, c.Name)
		switch {
		case !c.AllowPlacement && !here:
			reasons = append(reasons, c.Name+": allowServicePlacement is false")
		case !c.AutoPlace && !here && len(s.Requested) == 0:
			reasons = append(reasons, c.Name+": autoPlaceServices is false and the service does not name it")
		case c.ServiceLabels != nil && !c.ServiceLabels.Matches(labels.Set(s.Labels)):
			reasons = append(reasons, c.Name+": serviceLabelSelector does not match the service")
		case c.ServiceNamespaces != nil && !c.ServiceNamespaces.Matches(labels.Set(s.NamespaceLabels)):
			reasons = append(reasons, c.Name+": serviceNamespaceSelector does not match the namespace")
		case s.Full[c.Name] != "" && !here:
			reasons = append(reasons, c.Name+": "+s.Full[c.Name])
		default:
			out = append(out, c.Name)
		}
	}
	if len(out) == 0 {
		return nil, &NoEligibleError{Service: s.Key, Reasons: reasons}
	}
	// A selector that matched is a preference: entries without service selectors are then only
	// the fallback (the existing provider's rule), except the one the service is already on.
	if slices.ContainsFunc(out, func(n string) bool { return hasServiceSelector(cfgs, n) }) {
		out = slices.DeleteFunc(out, func(n string) bool {
			return !hasServiceSelector(cfgs, n) && !strings.EqualFold(n, s.Current)
		})
	}
	return out, nil
}

func hasServiceSelector(cfgs []Config, name string) bool {
	for _, c := range cfgs {
		if c.Name == name {
			return c.ServiceLabels != nil || c.ServiceNamespaces != nil
		}
	}
	return false
}

// RuleLimit is Azure's limit of rules per load balancer for placement: a load balancer never
// receives a service whose rules would take it past Max.
type RuleLimit struct {
	// Max load-balancing rules per load balancer (0: no limit).
	Max int
	// Need is the number of rules the service brings.
	Need int
}

// RuleLimitError says that every eligible load balancer is too full for the service.
type RuleLimitError struct {
	Service string
	Need    int
	Max     int
	// Counts are the rules on each eligible load balancer's configuration.
	Counts map[string]int
	Names  []string
}

func (e *RuleLimitError) Error() string {
	parts := make([]string, 0, len(e.Names))
	for _, n := range e.Names {
		parts = append(parts, fmt.Sprintf("%s has %d", n, e.Counts[n]))
	}
	return fmt.Sprintf("service %s needs %d load balancing rules, but no eligible load balancer has room for them under Azure's limit of %d per Standard load balancer (%s)",
		e.Service, e.Need, e.Max, strings.Join(parts, ", "))
}

// HasRoom reports whether a load balancer with have rules takes need more under limit (0: no
// limit).
func HasRoom(have, need, limit int) bool { return limit <= 0 || have+need <= limit }

// ConflictError refuses the azure-load-balancer-configurations annotation together with a
// requested IP: the IP decides the load balancer (the one carrying it), so naming
// configurations as well contradicts it or says nothing.
type ConflictError struct{ Service string }

func (e *ConflictError) Error() string {
	// The existing provider's message opens it (users and tools match on it).
	return fmt.Sprintf("service %q has conflicting load balancer configuration: both a load balancer name (%s) and an IP address are specified: "+
		"the load balancer carrying the requested IP (spec.loadBalancerIP, azure-load-balancer-ipv4/ipv6, azure-pip-name/-ipv6) is the service's; "+
		"remove the annotation, or the requested IP to let the annotation choose", serviceName(e.Service), annotationKey)
}

// IPElsewhereError refuses a service whose requested IP is on a load balancer it may not use:
// the IP cannot leave it (other services use it there).
type IPElsewhereError struct {
	Service  string
	LB       string
	Eligible []string
}

func (e *IPElsewhereError) Error() string {
	// The existing provider's message opens it.
	return fmt.Sprintf("service %q specifies an IP that resides on load balancer %q, which is not in the eligible set %v: "+
		"nothing changes until the service may use that load balancer (selectors, allowServicePlacement, the %s annotation) or asks for another IP",
		serviceName(e.Service), e.LB, e.Eligible, annotationKey)
}

// MoveRefusedError refuses to move a service off a load balancer where its frontend is used by
// something else too: the frontend cannot leave, and moving those others as well would change
// services nobody touched.
type MoveRefusedError struct {
	Service  string
	From, To string // load balancer names
	Frontend string
	By       []string
}

func (e *MoveRefusedError) Error() string {
	// The existing provider's message opens it.
	return fmt.Sprintf("service %q cannot migrate from load balancer %q to %q because frontend IP %q is also referenced by other resources: "+
		"%s; the service stays on %s until it is eligible there again or nothing else uses the frontend",
		serviceName(e.Service), e.From, e.To, e.Frontend, strings.Join(e.By, ", "), e.From)
}

const annotationKey = "service.beta.kubernetes.io/azure-load-balancer-configurations"

// serviceName is the name part of a namespace/name key (the existing provider's messages name
// services so).
func serviceName(key string) string {
	return key[strings.LastIndex(key, "/")+1:]
}

// Conflict refuses the configurations annotation together with a requested IP (nil when the
// service has not both). Checked before anything else of the service is written.
func Conflict(s Service) error {
	if len(s.Requested) > 0 && s.PinsIP {
		return &ConflictError{Service: s.Key}
	}
	return nil
}

// Place decides the configuration of service s. rules counts the load-balancing rules on each
// configuration's load balancer (of the service's kind).
//
//   - The configurations annotation and a requested IP together are refused (*ConflictError).
//   - The load balancer carrying the IP the service asks for (Holder) is its place; a requested
//     IP on a load balancer the service may not use is refused (*IPElsewhereError).
//   - Otherwise the service stays on its current configuration while it is eligible there, else
//     it goes to the eligible one with the fewest rules (ties: the first in configuration order)
//     among those with room for limit.Need more rules (none: *RuleLimitError).
//   - A service never leaves a load balancer where something else uses its frontend
//     (*MoveRefusedError): the frontend would have to go with it, and with it every service
//     sharing the IP, which nobody asked for.
func Place(cfgs []Config, s Service, rules map[string]int, limit RuleLimit) (Decision, error) {
	if err := Conflict(s); err != nil {
		return Decision{}, err
	}
	in := s
	if in.Current == "" {
		// Joining the services of an IP counts as being there already (allowServicePlacement,
		// autoPlaceServices).
		in.Current = s.Holder
	}
	el, err := Eligible(cfgs, in)
	if err != nil {
		return Decision{}, err
	}
	eligible := func(n string) bool {
		return n != "" && slices.ContainsFunc(el, func(e string) bool { return strings.EqualFold(e, n) })
	}
	var target string
	switch {
	case eligible(s.Holder):
		target = canonical(cfgs, s.Holder)
	case s.PinsIP && s.Holder != "" && !strings.EqualFold(s.Holder, s.Current):
		return Decision{}, &IPElsewhereError{Service: s.Key, LB: LBName(canonical(cfgs, s.Holder), s.Internal), Eligible: el}
	case eligible(s.Current):
		target = canonical(cfgs, s.Current)
	default:
		room := el
		if limit.Max > 0 {
			room = slices.DeleteFunc(slices.Clone(el), func(n string) bool { return rules[n]+limit.Need > limit.Max })
			if len(room) == 0 {
				return Decision{}, &RuleLimitError{Service: s.Key, Need: limit.Need, Max: limit.Max, Counts: rules, Names: el}
			}
		}
		target = room[0]
		for _, n := range room[1:] {
			if rules[n] < rules[target] {
				target = n
			}
		}
	}
	if s.Current == "" || strings.EqualFold(target, s.Current) {
		return Decision{Name: target}, nil
	}
	from := canonical(cfgs, s.Current)
	if from == "" {
		from = s.Current
	}
	if len(s.SharedBy) > 0 {
		return Decision{}, &MoveRefusedError{Service: s.Key, From: LBName(from, s.Internal), To: LBName(target, s.Internal),
			Frontend: s.SharedFrontend, By: s.SharedBy}
	}
	return Decision{Name: target, Moved: true, From: from}, nil
}

// Node is what placement needs to know of a node.
type Node struct {
	Name   string
	Labels map[string]string
	// VMSet is the node's scale set or availability set ("" when unknown).
	VMSet string
	// Current is the configuration whose cluster pool holds the node now ("" when none).
	Current string
}

// NodeCandidates are the configurations a node may join, by these rules (first match wins):
// the one naming the node's VM set as primaryVMSet; else every one whose nodeSelector matches
// the node; else every one without a nodeSelector.
func NodeCandidates(cfgs []Config, n Node) []string {
	if n.VMSet != "" {
		for _, c := range cfgs {
			if c.PrimaryVMSet != "" && strings.EqualFold(c.PrimaryVMSet, n.VMSet) {
				return []string{c.Name}
			}
		}
	}
	var matched, open []string
	for _, c := range cfgs {
		switch {
		case c.Nodes == nil:
			open = append(open, c.Name)
		case c.Nodes.Matches(labels.Set(n.Labels)):
			matched = append(matched, c.Name)
		}
	}
	if len(matched) > 0 {
		return matched
	}
	return open
}

// PlaceNodes assigns every node to one configuration: a node stays where it is while that is
// still a candidate; the others go, in name order, to the candidate with the fewest nodes
// (counting the assignments made so far; ties: the first in configuration order). Nodes without
// a candidate are left out of the result and listed in unplaced.
func PlaceNodes(cfgs []Config, nodes []Node) (placed map[string]string, unplaced []string) {
	placed = map[string]string{}
	count := map[string]int{}
	cands := make([][]string, len(nodes))
	var movers []int
	for i, n := range nodes {
		cands[i] = NodeCandidates(cfgs, n)
		if cur := canonical(cfgs, n.Current); cur != "" && slices.Contains(cands[i], cur) {
			placed[n.Name] = cur
			count[cur]++
			continue
		}
		movers = append(movers, i)
	}
	sort.Slice(movers, func(a, b int) bool { return nodes[movers[a]].Name < nodes[movers[b]].Name })
	for _, i := range movers {
		if len(cands[i]) == 0 {
			unplaced = append(unplaced, nodes[i].Name)
			continue
		}
		best := cands[i][0]
		for _, c := range cands[i][1:] {
			if count[c] < count[best] {
				best = c
			}
		}
		placed[nodes[i].Name] = best
		count[best]++
	}
	return placed, unplaced
}

// canonical returns the configured spelling of a configuration name ("" when unknown).
func canonical(cfgs []Config, name string) string {
	if name == "" {
		return ""
	}
	for _, c := range cfgs {
		if strings.EqualFold(c.Name, name) {
			return c.Name
		}
	}
	return ""
}
