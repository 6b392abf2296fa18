package network

import (
	"regexp"
	"unicode/utf8"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// childNamePattern is NRP's rule for resource names, the elements of a resource's arrays
// included (a load balancer's rules and probes, an NSG's security rules, a route table's
// routes): word characters, '.', '-' and '_', beginning with a word character and ending with
// one or '_'; at most 80 characters.
var childNamePattern = regexp.MustCompile(`^[\p{L}\p{N}_]([\p{L}\p{N}_.-]*[\p{L}\p{N}_])?$`)

// checkChildNames refuses badly named elements of the given arrays of a document
// (InvalidResourceName, as for a resource's own name). Unnamed elements are left to the caller.
func checkChildNames(doc map[string]any, fields ...string) error {
	for _, f := range fields {
		for _, it := range childItems(doc, f) {
			if n := arm.Str(it, "name"); n != "" && (utf8.RuneCountInString(n) > 80 || !childNamePattern.MatchString(n)) {
				return arm.InvalidResourceName(n)
			}
		}
	}
	return nil
}

// checkLBElements applies NRP's checks of single load balancer elements (loadBalancer.json:
// LoadBalancingRulePropertiesFormat, ProbePropertiesFormat, OutboundRulePropertiesFormat,
// FrontendIPConfigurationPropertiesFormat); references between them are checked by
// prepareLoadBalancer. Codes other than InvalidRequestFormat are azsim's: NRP's are not on
// public record.
func checkLBElements(lbID arm.ResourceID, d map[string]any) error {
	childID := func(typ string, it map[string]any) string { return lbID.Child(typ, arm.Str(it, "name")).String() }
	for _, fe := range childItems(d, "frontendIPConfigurations") {
		if m := arm.Str(arm.Props(fe), "privateIPAllocationMethod"); m != "" && !oneOf(m, []string{"Static", "Dynamic"}) {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid privateIPAllocationMethod '%s' of %s.", m, childID("frontendIPConfigurations", fe))
		}
	}
	for _, r := range childItems(d, "loadBalancingRules") {
		rid, rp := childID("loadBalancingRules", r), arm.Props(r)
		proto := arm.Str(rp, "protocol")
		if proto == "" {
			return arm.BadRequest("InvalidRequestFormat", "Load balancing rule %s has no protocol.", rid)
		}
		if !oneOf(proto, []string{"Tcp", "Udp", "All"}) {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid protocol '%s' of load balancing rule %s; allowed values are Tcp, Udp, All.", proto, rid)
		}
		if ld := arm.Str(rp, "loadDistribution"); ld != "" && !oneOf(ld, []string{"Default", "SourceIP", "SourceIPProtocol"}) {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid loadDistribution '%s' of load balancing rule %s.", ld, rid)
		}
		fp, ok := numberOf(rp["frontendPort"])
		if !ok {
			return arm.BadRequest("InvalidRequestFormat", "Load balancing rule %s has no frontendPort.", rid)
		}
		if fp < 0 || fp > 65534 {
			return arm.BadRequest("InvalidLoadBalancingRuleFrontendPort", "Load balancing rule %s has frontend port %v; allowed values are 0-65534.", rid, rp["frontendPort"])
		}
		if bp, ok := numberOf(rp["backendPort"]); ok && (bp < 0 || bp > 65535) {
			return arm.BadRequest("InvalidLoadBalancingRuleBackendPort", "Load balancing rule %s has backend port %v; allowed values are 0-65535.", rid, rp["backendPort"])
		}
		if err := checkIdleTimeout(rid, rp, 4, 100); err != nil {
			return err
		}
	}
	for _, pr := range childItems(d, "probes") {
		pid, pp := childID("probes", pr), arm.Props(pr)
		proto := arm.Str(pp, "protocol")
		if proto == "" {
			return arm.BadRequest("InvalidRequestFormat", "Probe %s has no protocol.", pid)
		}
		if !oneOf(proto, []string{"Tcp", "Http", "Https"}) {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid protocol '%s' of probe %s; allowed values are Tcp, Http, Https.", proto, pid)
		}
		if n, ok := numberOf(pp["port"]); !ok || n < 1 || n > 65535 {
			return arm.BadRequest("InvalidProbePort", "Probe %s has an invalid port %v.", pid, pp["port"])
		}
		if n, ok := numberOf(pp["intervalInSeconds"]); ok && n < 5 {
			return arm.BadRequest("InvalidProbeIntervalInSeconds", "Probe %s has interval %v seconds; the minimum is 5.", pid, pp["intervalInSeconds"])
		}
		path := arm.Str(pp, "requestPath")
		switch web := !oneOf(proto, []string{"Tcp"}); {
		case web && path == "":
			return arm.BadRequest("InvalidProbeRequestPath", "Probe %s with protocol %s needs a requestPath.", pid, proto)
		case !web && path != "":
			return arm.BadRequest("InvalidProbeRequestPath", "Probe %s with protocol Tcp cannot have a requestPath ('%s').", pid, path)
		}
	}
	for _, r := range childItems(d, "outboundRules") {
		rid, rp := childID("outboundRules", r), arm.Props(r)
		if proto := arm.Str(rp, "protocol"); !oneOf(proto, []string{"Tcp", "Udp", "All"}) {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid protocol '%s' of outbound rule %s; allowed values are Tcp, Udp, All.", proto, rid)
		}
		if len(arm.RefIDs(rp, "frontendIPConfigurations")) == 0 {
			return arm.BadRequest("OutboundRuleMustHaveFrontendIPConfiguration", "Outbound rule %s references no frontend IP configuration.", rid)
		}
		if refID(rp, "backendAddressPool") == "" {
			return arm.BadRequest("InvalidRequestFormat", "Outbound rule %s has no backendAddressPool.", rid)
		}
		if n, ok := numberOf(rp["allocatedOutboundPorts"]); ok && (n < 0 || n > 64000 || int(n)%8 != 0 || n != float64(int(n))) {
			return arm.BadRequest("InvalidAllocatedOutboundPorts", "Outbound rule %s allocates %v outbound ports; the number must be a multiple of 8 between 0 and 64000.", rid, rp["allocatedOutboundPorts"])
		}
		if err := checkIdleTimeout(rid, rp, 4, 120); err != nil {
			return err
		}
	}
	return nil
}

// checkIdleTimeout checks an element's idleTimeoutInMinutes, when set, against [lo, hi]: Standard
// load balancers take 4-100 minutes on load balancing rules and 4-120 on outbound rules (the
// spec's descriptions still say 4-30 for rules; azsim takes the wider range so as never to be
// stricter than NRP).
func checkIdleTimeout(id string, p map[string]any, lo, hi float64) error {
	if n, ok := numberOf(p["idleTimeoutInMinutes"]); ok && (n < lo || n > hi) {
		return arm.BadRequest("InvalidIdleTimeoutInMinutes", "%s has idle timeout %v minutes; allowed values are %v-%v.", id, p["idleTimeoutInMinutes"], lo, hi)
	}
	return nil
}
