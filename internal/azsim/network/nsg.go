package network

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// defaultRules are the six rules NRP adds to every NSG.
var defaultRules = []struct {
	name, desc, src, dst, access, direction string
	priority                                int
}{
	{"AllowVnetInBound", "Allow inbound traffic from all VMs in VNET", "VirtualNetwork", "VirtualNetwork", "Allow", "Inbound", 65000},
	{"AllowAzureLoadBalancerInBound", "Allow inbound traffic from azure load balancer", "AzureLoadBalancer", "*", "Allow", "Inbound", 65001},
	{"DenyAllInBound", "Deny all inbound traffic", "*", "*", "Deny", "Inbound", 65500},
	{"AllowVnetOutBound", "Allow outbound traffic from all VMs to all VMs in VNET", "VirtualNetwork", "VirtualNetwork", "Allow", "Outbound", 65000},
	{"AllowInternetOutBound", "Allow outbound traffic from all VMs to Internet", "*", "Internet", "Allow", "Outbound", 65001},
	{"DenyAllOutBound", "Deny all outbound traffic", "*", "*", "Deny", "Outbound", 65500},
}

func defaultSecurityRules() []map[string]any {
	out := make([]map[string]any, 0, len(defaultRules))
	for _, r := range defaultRules {
		out = append(out, map[string]any{
			"name": r.name,
			"properties": map[string]any{
				"description": r.desc, "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
				"sourceAddressPrefix": r.src, "destinationAddressPrefix": r.dst, "access": r.access,
				"priority": r.priority, "direction": r.direction,
				"sourcePortRanges": []any{}, "destinationPortRanges": []any{},
				"sourceAddressPrefixes": []any{}, "destinationAddressPrefixes": []any{},
			},
		})
	}
	return out
}

// NSG limits (Azure networking limits): 1000 rules per NSG, priorities 100-4096.
const maxRulesPerNSG = 1000

func prepareNSG(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.SecurityGroup{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	defaults(arm.Props(w.Doc), "securityRules", []any{})
	if err := checkChildNames(w.Doc, "securityRules"); err != nil {
		return err
	}
	rules := childItems(w.Doc, "securityRules")
	if len(rules) > maxRulesPerNSG {
		return arm.BadRequest("SecurityRulesLimitReached", "Network security group %s has %d security rules, which exceeds the limit of %d.", w.ID, len(rules), maxRulesPerNSG)
	}
	prio := map[string]string{}
	for _, r := range rules {
		p := arm.Props(r)
		name := arm.Str(r, "name")
		rid := w.ID.Child("securityRules", name).String()
		if err := checkSecurityRule(rid, p); err != nil {
			return err
		}
		if err := checkRuleAddresses(rid, p); err != nil {
			return err
		}
		key := strings.ToLower(arm.Str(p, "direction")) + "/" + strings.TrimSpace(jsonNum(p["priority"]))
		if other, dup := prio[key]; dup {
			return arm.BadRequest("SecurityRuleConflict", "Security rule %s conflicts with rule %s. Rules cannot have the same Priority and Direction.", name, other)
		}
		prio[key] = name
	}
	arm.SetArr(w.Doc, defaultSecurityRules(), "properties", "defaultSecurityRules")
	// Read-only back-references are kept until the deriver recomputes them.
	carry(w, "networkInterfaces", "subnets")
	return nil
}

// checkRuleAddresses refuses, as NRP does, an address list of a security rule that names one
// range twice or two ranges that overlap (an address is its host range; service tags and "*"
// only count as repeats).
func checkRuleAddresses(rid string, p map[string]any) error {
	for _, f := range []string{"sourceAddressPrefixes", "destinationAddressPrefixes"} {
		raw, _ := p[f].([]any)
		type seen struct {
			value  string
			prefix netip.Prefix
		}
		var prev []seen
		for _, v := range raw {
			s, _ := v.(string)
			cur := seen{value: s}
			if pf, err := netip.ParsePrefix(s); err == nil {
				cur.prefix = pf.Masked()
			} else if a, err := netip.ParseAddr(s); err == nil {
				cur.prefix = netip.PrefixFrom(a, a.BitLen())
			}
			for _, o := range prev {
				switch {
				case o.prefix.IsValid() && cur.prefix.IsValid() && o.prefix == cur.prefix,
					!o.prefix.IsValid() && !cur.prefix.IsValid() && strings.EqualFold(o.value, cur.value):
					return arm.BadRequest("SecurityRuleParameterContainsDuplicateValue",
						"Security rule %s lists %s more than once in %s.", rid, s, f)
				case o.prefix.IsValid() && cur.prefix.IsValid() && o.prefix.Overlaps(cur.prefix):
					return arm.BadRequest("OverlappingSubnetsNotPermittedInSecurityRule",
						"Security rule %s lists the overlapping ranges %s and %s in %s.", rid, o.value, s, f)
				}
			}
			prev = append(prev, cur)
		}
	}
	return nil
}

func beforeDeleteNSG(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	p := arm.Props(doc)
	var by []string
	by = append(by, arm.RefIDs(p, "subnets")...)
	by = append(by, arm.RefIDs(p, "networkInterfaces")...)
	if len(by) > 0 {
		return arm.BadRequest("InUseNetworkSecurityGroupCannotBeDeleted",
			"Network security group %s cannot be deleted because it is in use by the following resources: %s.", id, strings.Join(by, ", "))
	}
	return nil
}

func prepareRouteTable(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.RouteTable{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	defaults(arm.Props(w.Doc), "routes", []any{}, "disableBgpRoutePropagation", false)
	if err := checkChildNames(w.Doc, "routes"); err != nil {
		return err
	}
	for _, r := range childItems(w.Doc, "routes") {
		p := arm.Props(r)
		if arm.Str(p, "addressPrefix") == "" {
			return arm.BadRequest("InvalidRequestFormat", "Route %s has no addressPrefix.", arm.Str(r, "name"))
		}
		hop := arm.Str(p, "nextHopType")
		if hop == "" {
			return arm.BadRequest("InvalidRequestFormat", "Route %s has no nextHopType.", arm.Str(r, "name"))
		}
		// RouteNextHopType in routeTable.json.
		if !oneOf(hop, []string{"VirtualNetworkGateway", "VnetLocal", "Internet", "VirtualAppliance", "None"}) {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid nextHopType '%s' of route %s.", hop, arm.Str(r, "name"))
		}
		if strings.EqualFold(hop, "VirtualAppliance") && arm.Str(p, "nextHopIpAddress") == "" {
			return arm.BadRequest("RouteNextHopIpAddressMissing", "Route %s with next hop type VirtualAppliance must have a next hop IP address.", arm.Str(r, "name"))
		}
	}
	if n := len(childItems(w.Doc, "routes")); n > 400 {
		return arm.Errorf(http.StatusBadRequest, "RouteTableLimitReached", "Route table %s has %d routes, exceeding the limit of 400.", w.ID, n)
	}
	carry(w, "subnets")
	return nil
}

func beforeDeleteRouteTable(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	if by := arm.RefIDs(arm.Props(doc), "subnets"); len(by) > 0 {
		return inUse("InUseRouteTableCannotBeDeleted", "Route table", id.String(), by)
	}
	return nil
}

// carry copies read-only properties from the old document (the deriver owns them).
func carry(w *arm.Write, keys ...string) {
	p := arm.Props(w.Doc)
	for _, k := range keys {
		delete(p, k)
		if w.Old != nil {
			if v, ok := arm.Obj(w.Old, false, "properties")[k]; ok {
				p[k] = v
			}
		}
	}
}
