package network

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// checkSecurityRule applies NRP's checks of one security rule (SecurityRulePropertiesFormat in
// networkSecurityGroup.json) that do not depend on the other rules; rid is the rule's ID.
//
//   - protocol, access and direction are required and take the spec's enum values
//     (SecurityRuleInvalidProtocol / …Access / …Direction);
//   - priority 100-4096 (SecurityRuleInvalidPriority);
//   - every port or port range is "*", an integer or two joined by '-', within 0-65535
//     (SecurityRuleInvalidPortRange, NRP's code);
//   - an address that looks like an IP address, prefix or range must be one
//     (SecurityRuleInvalidAddressPrefix, NRP's code); any word is taken as a service tag;
//   - the plural address lists take addresses only, not '*' or tags
//     (SecurityRuleParameterContainsUnsupportedValue, NRP's code and wording);
//   - no value twice in sourceAddressPrefixes, destinationAddressPrefixes, sourcePortRanges or
//     destinationPortRanges (SecurityRuleParameterContainsDuplicateValue, NRP's code; values
//     compared as sent).
func checkSecurityRule(rid string, p map[string]any) error {
	for _, f := range []struct {
		field   string
		allowed []string
	}{
		{"protocol", []string{"Tcp", "Udp", "Icmp", "Esp", "*", "Ah"}},
		{"access", []string{"Allow", "Deny"}},
		{"direction", []string{"Inbound", "Outbound"}},
	} {
		v := arm.Str(p, f.field)
		if !oneOf(v, f.allowed) {
			return arm.BadRequest("SecurityRuleInvalid"+strings.ToUpper(f.field[:1])+f.field[1:],
				"Security rule %s has invalid %s. Value provided: '%s'. Allowed values: %s.", rid, f.field, v, strings.Join(f.allowed, ", "))
		}
	}
	if n, ok := numberOf(p["priority"]); !ok || n < 100 || n > 4096 {
		return arm.BadRequest("SecurityRuleInvalidPriority", "Security rule %s has invalid Priority. Value provided: %v. Allowed range 100-4096.", rid, p["priority"])
	}
	for _, f := range []string{"sourcePortRange", "destinationPortRange", "sourcePortRanges", "destinationPortRanges"} {
		for _, v := range fieldValues(p, f) {
			if !validPortRange(v) {
				return arm.BadRequest("SecurityRuleInvalidPortRange",
					"Security rule %s has invalid port range '%s' in %s: a port range is '*', a port or two ports joined by '-', within 0-65535.", rid, v, f)
			}
		}
	}
	for _, f := range []string{"sourceAddressPrefix", "destinationAddressPrefix", "sourceAddressPrefixes", "destinationAddressPrefixes"} {
		plural := strings.HasSuffix(f, "es")
		for _, v := range fieldValues(p, f) {
			switch {
			case isTagLike(v) && plural:
				return arm.BadRequest("SecurityRuleParameterContainsUnsupportedValue",
					"Security rule parameter %s for rule with Id %s cannot specify '*', VirtualNetwork, Internet, AzureLoadBalancer or other service tags. Unsupported value used: %s.", pascal(f), rid, v)
			case !isTagLike(v) && !validAddressPrefix(v):
				return arm.BadRequest("SecurityRuleInvalidAddressPrefix",
					"Security rule %s has invalid address prefix '%s' in %s.", rid, v, f)
			}
		}
	}
	for _, f := range []string{"sourceAddressPrefixes", "destinationAddressPrefixes", "sourcePortRanges", "destinationPortRanges"} {
		seen := map[string]bool{}
		for _, v := range fieldValues(p, f) {
			if seen[v] {
				return arm.BadRequest("SecurityRuleParameterContainsDuplicateValue",
					"Security rule parameter %s for rule with Id %s cannot specify the value %s more than once.", pascal(f), rid, v)
			}
			seen[v] = true
		}
	}
	return nil
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return true
		}
	}
	return false
}

// fieldValues returns a string field as a one-element list, or a list field's strings ("" and
// missing values left out).
func fieldValues(p map[string]any, f string) []string {
	switch v := p[f].(type) {
	case string:
		if v != "" {
			return []string{v}
		}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// pascal spells a field as NRP's messages name parameters (sourceAddressPrefixes → SourceAddressPrefixes).
func pascal(f string) string { return strings.ToUpper(f[:1]) + f[1:] }

func validPortRange(v string) bool {
	v = strings.TrimSpace(v)
	if v == "*" {
		return true
	}
	port := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil && n >= 0 && n <= 65535
	}
	lo, hi, isRange := strings.Cut(v, "-")
	a, ok := port(lo)
	if !ok {
		return false
	}
	if !isRange {
		return true
	}
	b, ok := port(hi)
	return ok && a <= b
}

// isTagLike: '*' and words such as Internet, VirtualNetwork or Storage.EastUS (a letter first,
// no ':' as in an IPv6 address).
func isTagLike(v string) bool {
	v = strings.TrimSpace(v)
	if v == "*" {
		return true
	}
	r := []rune(v)
	return len(r) > 0 && unicode.IsLetter(r[0]) && !strings.Contains(v, ":")
}

// validAddressPrefix: an IP address, a CIDR prefix, or a range of two addresses joined by '-'.
func validAddressPrefix(v string) bool {
	v = strings.TrimSpace(v)
	if _, err := netip.ParseAddr(v); err == nil {
		return true
	}
	if _, err := netip.ParsePrefix(v); err == nil {
		return true
	}
	lo, hi, ok := strings.Cut(v, "-")
	if !ok {
		return false
	}
	a, errA := netip.ParseAddr(strings.TrimSpace(lo))
	b, errB := netip.ParseAddr(strings.TrimSpace(hi))
	return errA == nil && errB == nil && a.Is4() == b.Is4() && !b.Less(a)
}
