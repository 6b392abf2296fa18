package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tags"
)

// NSG limits of ARM.
const (
	maxSecurityRules  = 1000
	maxRuleSourceIPs  = 4000
	maxRuleDestinaIPs = 4000
)

// SecurityInput is what the NSG planner needs about one service.
type SecurityInput struct {
	Service *Service
	// Want is false when the service is deleted or no longer a LoadBalancer: only clean.
	Want bool
	// Destinations are the service's frontend addresses (plus azure-additional-public-ips), or
	// the node addresses when floating IP is disabled.
	Destinations []netip.Addr
	// Stale are former destinations of the service to remove as well (for example an old IP).
	Stale []netip.Addr
	// RetainPorts are, by ARM protocol (Tcp, Udp, *), the ports other services still serve on
	// the same destinations (shared IPs, node IPs); their part of shared rules is kept.
	RetainPorts map[armnetwork.SecurityRuleProtocol][]int32
	// Tags are azure.json's tag settings, reconciled on the NSG with every write.
	Tags tags.Policy
}

// DestinationPorts groups the service's NSG destination ports by ARM protocol: service ports, or
// node ports when floating IP is disabled.
func DestinationPorts(s *Service) (map[armnetwork.SecurityRuleProtocol][]int32, error) {
	out := map[armnetwork.SecurityRuleProtocol][]int32{}
	for _, p := range s.Svc.Spec.Ports {
		proto, err := securityProtocol(p.Protocol)
		if err != nil {
			return nil, err
		}
		port := p.Port
		if s.Opts.DisableFloatingIP {
			port = p.NodePort
		}
		if !slices.Contains(out[proto], port) {
			out[proto] = append(out[proto], port)
		}
	}
	return out, nil
}

func securityProtocol(p v1.Protocol) (armnetwork.SecurityRuleProtocol, error) {
	switch p {
	case v1.ProtocolTCP, "":
		return armnetwork.SecurityRuleProtocolTCP, nil
	case v1.ProtocolUDP:
		return armnetwork.SecurityRuleProtocolUDP, nil
	case v1.ProtocolSCTP:
		return armnetwork.SecurityRuleProtocolAsterisk, nil
	}
	return "", fmt.Errorf("unsupported protocol %q", p)
}

var securityProtocols = []armnetwork.SecurityRuleProtocol{
	armnetwork.SecurityRuleProtocolTCP, armnetwork.SecurityRuleProtocolUDP, armnetwork.SecurityRuleProtocolAsterisk,
}

// allowFromInternet is the existing provider's rule: public services without source
// restrictions (or with an allow-all range) are open to the Internet tag; internal services only
// when a range explicitly allows all.
func allowFromInternet(o *annotations.ServiceOptions) bool {
	if len(o.AllowedServiceTags) > 0 || len(o.InvalidRanges) > 0 {
		return false
	}
	allowAll := func(ps []netip.Prefix) bool {
		return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Bits() == 0 })
	}
	if len(o.SourceRanges) > 0 && !allowAll(o.SourceRanges) {
		return false
	}
	if len(o.AllowedIPRanges) > 0 && !allowAll(o.AllowedIPRanges) {
		return false
	}
	if !o.Internal {
		return true
	}
	return len(o.AllowedIPRanges) > 0 || len(o.SourceRanges) > 0
}

// ApplySecurity updates the NSG for one service: it removes the service's destinations from the
// provider's rules (keeping what other services on the same addresses still need), then adds the
// allow rules (and deny-all rule) the service wants. Rules outside the provider's naming and
// priority band are never touched. Rules with the same protocol, sources and ports are shared
// between services: their destinations are merged.
func ApplySecurity(nsg *armnetwork.SecurityGroup, in SecurityInput) (*armnetwork.SecurityGroup, error) {
	if nsg == nil {
		return nil, fmt.Errorf("network security group does not exist (the provider never creates it)")
	}
	if nsg.Properties == nil {
		nsg.Properties = &armnetwork.SecurityGroupPropertiesFormat{}
	}
	h := newRuleHelper(nsg)
	before := addressLists(nsg)
	clean := slices.Concat(in.Destinations, in.Stale)
	if err := h.removeDestinations(clean, in.RetainPorts); err != nil {
		return nil, err
	}
	s := in.Service
	if in.Want && !s.Opts.DisableNSGRule {
		if err := h.patch(s, in.Destinations); err != nil {
			return nil, err
		}
	}
	h.dropEmpty()
	h.keepOrder(before)
	if err := h.checkLimits(); err != nil {
		return nil, err
	}
	nsg.Tags, _ = in.Tags.ApplyConfig(nsg.Tags)
	return nsg, nil
}

type ruleHelper struct {
	nsg        *armnetwork.SecurityGroup
	priorities map[int32]bool
}

func newRuleHelper(nsg *armnetwork.SecurityGroup) *ruleHelper {
	h := &ruleHelper{nsg: nsg, priorities: map[int32]bool{}}
	for _, r := range nsg.Properties.SecurityRules {
		if r.Properties != nil && r.Properties.Priority != nil {
			h.priorities[*r.Properties.Priority] = true
		}
	}
	return h
}

func managed(r *armnetwork.SecurityRule) bool {
	return r != nil && r.Properties != nil && r.Properties.Priority != nil &&
		naming.IsManagedSecurityRule(str(r.Name), *r.Properties.Priority)
}

func (h *ruleHelper) find(name string) *armnetwork.SecurityRule {
	for _, r := range h.nsg.Properties.SecurityRules {
		if eqFold(str(r.Name), name) {
			return r
		}
	}
	return nil
}

// nextPriority returns the first free priority from 500 up (allow) or from 4095 down (deny).
func (h *ruleHelper) nextPriority(fromEnd bool) (int32, error) {
	if fromEnd {
		for p := int32(naming.MaxRulePriority - 1); p >= naming.MinRulePriority; p-- {
			if !h.priorities[p] {
				return p, nil
			}
		}
	} else {
		for p := int32(naming.MinRulePriority); p < naming.MaxRulePriority; p++ {
			if !h.priorities[p] {
				return p, nil
			}
		}
	}
	return 0, fmt.Errorf("no free NSG rule priority between %d and %d", naming.MinRulePriority, naming.MaxRulePriority)
}

func (h *ruleHelper) getOrCreate(name string, fromEnd bool) (*armnetwork.SecurityRule, error) {
	if r := h.find(name); r != nil {
		if r.Properties == nil {
			r.Properties = &armnetwork.SecurityRulePropertiesFormat{}
		}
		return r, nil
	}
	p, err := h.nextPriority(fromEnd)
	if err != nil {
		return nil, err
	}
	h.priorities[p] = true
	r := &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: to.Ptr(p)}}
	h.nsg.Properties.SecurityRules = append(h.nsg.Properties.SecurityRules, r)
	return r, nil
}

func destinations(r *armnetwork.SecurityRule) []string {
	var out []string
	if v := str(r.Properties.DestinationAddressPrefix); v != "" {
		out = append(out, v)
	}
	for _, v := range r.Properties.DestinationAddressPrefixes {
		if v != nil && *v != "" {
			out = append(out, *v)
		}
	}
	return out
}

func sources(r *armnetwork.SecurityRule) []string {
	var out []string
	if v := str(r.Properties.SourceAddressPrefix); v != "" {
		out = append(out, v)
	}
	for _, v := range r.Properties.SourceAddressPrefixes {
		if v != nil {
			out = append(out, *v)
		}
	}
	return out
}

// sortedSet is the values sorted, each once: the order the provider writes address lists in.
func sortedSet(vs []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(vs)))
}

// setDestinations stores deduplicated, sorted destinations: one in the singular field, several in
// the plural one, as the existing provider writes them.
func setDestinations(r *armnetwork.SecurityRule, ds []string) {
	ds = sortedSet(ds)
	if len(ds) == 1 {
		r.Properties.DestinationAddressPrefix = to.Ptr(ds[0])
		r.Properties.DestinationAddressPrefixes = nil
		return
	}
	r.Properties.DestinationAddressPrefix = nil
	r.Properties.DestinationAddressPrefixes = to.SliceOfPtrs(ds...)
}

func ports(r *armnetwork.SecurityRule) ([]int32, bool) {
	var vals []string
	if v := str(r.Properties.DestinationPortRange); v != "" {
		vals = append(vals, v)
	}
	for _, v := range r.Properties.DestinationPortRanges {
		if v != nil {
			vals = append(vals, *v)
		}
	}
	out := make([]int32, 0, len(vals))
	for _, v := range vals {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, false // "*" or a range: not written by the provider
		}
		out = append(out, int32(n))
	}
	return out, true
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func (h *ruleHelper) removeDestinations(addrs []netip.Addr, retain map[armnetwork.SecurityRuleProtocol][]int32) error {
	if len(addrs) == 0 {
		return nil
	}
	remove := map[string]bool{}
	for _, a := range addrStrings(addrs) {
		remove[a] = true
	}
	// Iterate over a copy: splitting a rule may append one.
	for _, r := range slices.Clone(h.nsg.Properties.SecurityRules) {
		if !managed(r) || r.Properties.Protocol == nil {
			continue
		}
		cur := destinations(r)
		var keep, hit []string
		for _, d := range cur {
			if remove[d] {
				hit = append(hit, d)
			} else {
				keep = append(keep, d)
			}
		}
		if len(hit) == 0 {
			continue
		}
		if r.Properties.Access != nil && *r.Properties.Access == armnetwork.SecurityRuleAccessDeny {
			if len(retain[*r.Properties.Protocol]) == 0 {
				setDestinations(r, keep)
			}
			continue
		}
		cur32, ok := ports(r)
		if !ok {
			continue
		}
		var kept []int32
		for _, p := range cur32 {
			if slices.Contains(retain[*r.Properties.Protocol], p) {
				kept = append(kept, p)
			}
		}
		if len(kept) == len(cur32) {
			continue // every port of the rule is still served on these addresses by others
		}
		setDestinations(r, keep)
		if len(kept) > 0 {
			// Other services still need some of the ports: move these addresses to a rule with
			// just those ports.
			fam := naming.IPv4
			if a, err := netip.ParseAddr(hit[0]); err == nil && a.Is6() {
				fam = naming.IPv6
			}
			if err := h.addAllow(*r.Properties.Protocol, fam, sources(r), hit, kept); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *ruleHelper) addAllow(proto armnetwork.SecurityRuleProtocol, f naming.Family, srcs, dsts []string, dstPorts []int32) error {
	name := naming.AllowRuleName(string(proto), f, srcs, dstPorts)
	r, err := h.getOrCreate(name, false)
	if err != nil {
		return err
	}
	p := r.Properties
	p.Protocol = to.Ptr(proto)
	p.Access = to.Ptr(armnetwork.SecurityRuleAccessAllow)
	p.Direction = to.Ptr(armnetwork.SecurityRuleDirectionInbound)
	if sorted := sortedSet(srcs); len(sorted) == 1 {
		p.SourceAddressPrefix, p.SourceAddressPrefixes = to.Ptr(sorted[0]), nil
	} else {
		p.SourceAddressPrefix, p.SourceAddressPrefixes = nil, to.SliceOfPtrs(sorted...)
	}
	p.SourcePortRange = to.Ptr("*")
	setDestinations(r, append(destinations(r), dsts...))
	p.DestinationPortRange = nil
	p.DestinationPortRanges = to.SliceOfPtrs(naming.PortStrings(dstPorts)...)
	return nil
}

func (h *ruleHelper) addDenyAll(f naming.Family, dsts []string) error {
	r, err := h.getOrCreate(naming.DenyAllRuleName(f), true)
	if err != nil {
		return err
	}
	p := r.Properties
	p.Protocol = to.Ptr(armnetwork.SecurityRuleProtocolAsterisk)
	p.Access = to.Ptr(armnetwork.SecurityRuleAccessDeny)
	p.Direction = to.Ptr(armnetwork.SecurityRuleDirectionInbound)
	p.SourceAddressPrefix, p.SourceAddressPrefixes = to.Ptr("*"), nil
	p.SourcePortRange = to.Ptr("*")
	setDestinations(r, append(destinations(r), dsts...))
	p.DestinationPortRange, p.DestinationPortRanges = to.Ptr("*"), nil
	return nil
}

func (h *ruleHelper) patch(s *Service, dsts []netip.Addr) error {
	o := s.Opts
	byProto, err := DestinationPorts(s)
	if err != nil {
		return err
	}
	var dst4, dst6 []string
	for _, a := range dsts {
		if a.Is4() {
			dst4 = append(dst4, a.String())
		} else {
			dst6 = append(dst6, a.String())
		}
	}
	// Overlapping and repeated ranges are aggregated: NRP refuses a rule listing a value twice
	// or two overlapping ranges.
	var ranges4, ranges6 []string
	for _, p := range AggregatePrefixes(o.AllowedRanges()) {
		if p.Addr().Is4() {
			ranges4 = append(ranges4, p.String())
		} else {
			ranges6 = append(ranges6, p.String())
		}
	}
	tags := slices.Clone(o.AllowedServiceTags)
	if allowFromInternet(o) {
		tags = append(tags, annotations.ServiceTagInternet)
	}
	for _, proto := range securityProtocols {
		ps, ok := byProto[proto]
		if !ok {
			continue
		}
		for _, fam := range []struct {
			f      naming.Family
			dst    []string
			ranges []string
		}{{naming.IPv4, dst4, ranges4}, {naming.IPv6, dst6, ranges6}} {
			if len(fam.dst) == 0 {
				continue
			}
			for _, tag := range tags {
				if err := h.addAllow(proto, fam.f, []string{tag}, fam.dst, ps); err != nil {
					return err
				}
			}
			if len(fam.ranges) > 0 {
				if err := h.addAllow(proto, fam.f, fam.ranges, fam.dst, ps); err != nil {
					return err
				}
			}
		}
	}
	// Malformed ranges that were dropped also add the deny-all rule (the existing provider's
	// safety net: what the user meant to restrict stays restricted).
	if (o.DenyAllExceptSourceRanges && len(o.AllowedRanges()) > 0) || len(o.InvalidRanges) > 0 {
		if len(dst4) > 0 {
			if err := h.addDenyAll(naming.IPv4, dst4); err != nil {
				return err
			}
		}
		if len(dst6) > 0 {
			if err := h.addDenyAll(naming.IPv6, dst6); err != nil {
				return err
			}
		}
	}
	return nil
}

// ruleAddresses are the address fields of a rule as read.
type ruleAddresses struct {
	src, dst   *string
	srcs, dsts []*string
}

func cloneStrings(ps []*string) []*string {
	if ps == nil {
		return nil
	}
	out := make([]*string, len(ps))
	for i, p := range ps {
		if p != nil {
			out[i] = to.Ptr(*p)
		}
	}
	return out
}

func cloneString(p *string) *string {
	if p == nil {
		return nil
	}
	return to.Ptr(*p)
}

// addressLists copies the address fields of the provider's rules, by lower-cased name.
func addressLists(nsg *armnetwork.SecurityGroup) map[string]ruleAddresses {
	out := map[string]ruleAddresses{}
	for _, r := range nsg.Properties.SecurityRules {
		if managed(r) {
			p := r.Properties
			out[strings.ToLower(str(r.Name))] = ruleAddresses{src: cloneString(p.SourceAddressPrefix), dst: cloneString(p.DestinationAddressPrefix),
				srcs: cloneStrings(p.SourceAddressPrefixes), dsts: cloneStrings(p.DestinationAddressPrefixes)}
		}
	}
	return out
}

// keepOrder puts back the address fields a rule had when they listed the same values, each
// once, in another order (or a single value in the plural field): the writer compares whole
// models, and a new order alone would cost a PUT. Rules are written sorted; one that Azure or
// someone else ordered differently is left as it is.
func (h *ruleHelper) keepOrder(before map[string]ruleAddresses) {
	for _, r := range h.nsg.Properties.SecurityRules {
		b, ok := before[strings.ToLower(str(r.Name))]
		if !ok || !managed(r) {
			continue
		}
		p := r.Properties
		if sameValues(listed(p.SourceAddressPrefix, p.SourceAddressPrefixes), listed(b.src, b.srcs)) {
			p.SourceAddressPrefix, p.SourceAddressPrefixes = b.src, b.srcs
		}
		if sameValues(listed(p.DestinationAddressPrefix, p.DestinationAddressPrefixes), listed(b.dst, b.dsts)) {
			p.DestinationAddressPrefix, p.DestinationAddressPrefixes = b.dst, b.dsts
		}
	}
}

// listed are the non-empty values of a singular and a plural address field.
func listed(one *string, many []*string) []string {
	var out []string
	for _, v := range append([]*string{one}, many...) {
		if v != nil && *v != "" {
			out = append(out, *v)
		}
	}
	return out
}

// sameValues reports whether a and b list the same values, each once.
func sameValues(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b) && len(slices.Compact(slices.Clone(a))) == len(a)
}

// dropEmpty removes provider rules left without destinations.
func (h *ruleHelper) dropEmpty() {
	h.nsg.Properties.SecurityRules = slices.DeleteFunc(h.nsg.Properties.SecurityRules, func(r *armnetwork.SecurityRule) bool {
		return managed(r) && len(destinations(r)) == 0 && len(r.Properties.DestinationApplicationSecurityGroups) == 0
	})
}

func (h *ruleHelper) checkLimits() error {
	var nRules, nSrc, nDst int
	for _, r := range h.nsg.Properties.SecurityRules {
		nRules++
		if r.Properties == nil {
			continue
		}
		nSrc += len(sources(r))
		nDst += len(destinations(r))
	}
	switch {
	case nRules > maxSecurityRules:
		return fmt.Errorf("NSG %s would have %d rules (limit %d)", str(h.nsg.Name), nRules, maxSecurityRules)
	case nSrc > maxRuleSourceIPs:
		return fmt.Errorf("NSG %s would have %d source prefixes (limit %d)", str(h.nsg.Name), nSrc, maxRuleSourceIPs)
	case nDst > maxRuleDestinaIPs:
		return fmt.Errorf("NSG %s would have %d destination prefixes (limit %d)", str(h.nsg.Name), nDst, maxRuleDestinaIPs)
	}
	return nil
}

// ManagedRuleNames lists the provider's rules of an NSG (tests, diagnostics).
func ManagedRuleNames(nsg *armnetwork.SecurityGroup) []string {
	var out []string
	if nsg == nil || nsg.Properties == nil {
		return nil
	}
	for _, r := range nsg.Properties.SecurityRules {
		if managed(r) {
			out = append(out, str(r.Name))
		}
	}
	sort.Strings(out)
	return out
}
