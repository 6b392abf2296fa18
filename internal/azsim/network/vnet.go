package network

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// Azure keeps the first four and the last address of every subnet.
const subnetSkipLow, subnetSkipHigh = 4, 1

func prepareVNet(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.VirtualNetwork{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	defaults(arm.Props(w.Doc), "subnets", []any{}, "virtualNetworkPeerings", []any{}, "enableDdosProtection", false,
		"privateEndpointVNetPolicies", "Disabled")
	var space []netip.Prefix
	for _, s := range stringsAt(w.Doc, "properties", "addressSpace", "addressPrefixes") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return arm.BadRequest("InvalidAddressPrefixFormat", "Address prefix %s of resource %s is not formatted correctly.", s, w.ID)
		}
		space = append(space, p.Masked())
	}
	if len(space) == 0 {
		return arm.BadRequest("AddressSpaceMustHaveAtLeastOnePrefix", "Virtual network %s must have at least one address prefix in its address space.", w.ID)
	}
	var seen []netip.Prefix
	kept := map[string]bool{}
	plsSubnets := privateLinkServiceSubnets(tx)
	for _, sn := range childItems(w.Doc, "subnets") {
		name := arm.Str(sn, "name")
		if name == "" {
			return arm.BadRequest("InvalidRequestFormat", "Subnet name is required in virtual network %s.", w.ID)
		}
		sid := w.ID.Child("subnets", name).String()
		kept[arm.KeyOf(sid)] = true
		prefixes := subnetPrefixes(sn)
		if len(prefixes) == 0 {
			return arm.BadRequest("NetcfgInvalidSubnet", "Subnet '%s' is not valid in virtual network '%s'.", name, w.ID.Name())
		}
		for _, s := range prefixes {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return arm.BadRequest("InvalidAddressPrefixFormat", "Address prefix %s of resource %s is not formatted correctly.", s, sid)
			}
			p = p.Masked()
			inside := false
			for _, sp := range space {
				inside = inside || (sp.Bits() <= p.Bits() && sp.Contains(p.Addr()))
			}
			if !inside {
				return arm.BadRequest("NetcfgSubnetRangeOutsideVnet",
					"Subnet '%s' is not valid because its IP address range is outside the IP address range of virtual network '%s'.", name, w.ID.Name())
			}
			for _, o := range seen {
				if o.Overlaps(p) {
					return arm.BadRequest("NetcfgSubnetRangesOverlap", "Subnet '%s' is not valid because its IP address range overlaps with that of an existing subnet in virtual network '%s'.", name, w.ID.Name())
				}
			}
			seen = append(seen, p)
		}
		props := arm.Props(sn)
		defaults(props, "delegations", []any{}, "privateEndpointNetworkPolicies", "Disabled", "privateLinkServiceNetworkPolicies", "Enabled")
		if plsSubnets[arm.KeyOf(sid)] && !strings.EqualFold(arm.Str(props, "privateLinkServiceNetworkPolicies"), "Disabled") {
			return errSubnetPoliciesInUse(sid)
		}
		for _, ref := range []string{"networkSecurityGroup", "routeTable", "natGateway", "serviceGateway"} {
			if err := requireRef(tx, refID(props, ref), sid); err != nil {
				return err
			}
		}
		// Read-only fields are recomputed by the derivers; keep the old values until then.
		for _, ro := range []string{"ipConfigurations", "privateEndpoints"} {
			delete(props, ro)
			if w.Old != nil {
				if old := findChild(w.Old, "subnets", name); old != nil {
					if v, ok := arm.Props(old)[ro]; ok {
						props[ro] = v
					}
				}
			}
		}
	}
	// Removing a subnet that still has addresses allocated fails.
	if w.Old != nil {
		for _, sn := range childItems(w.Old, "subnets") {
			sid := w.ID.Child("subnets", arm.Str(sn, "name")).String()
			if kept[arm.KeyOf(sid)] {
				continue
			}
			if ips := tx.IPsInSpace(subnetSpace(sid)); len(ips) > 0 {
				return arm.BadRequest("InUseSubnetCannotBeDeleted",
					"Subnet %s is in use by %d IP configurations and cannot be deleted. In order to delete the subnet, delete all the resources within the subnet.", arm.Str(sn, "name"), len(ips))
			}
		}
	}
	return nil
}

func beforeDeleteVNet(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	for _, sn := range childItems(doc, "subnets") {
		sid := id.Child("subnets", arm.Str(sn, "name")).String()
		if ips := tx.IPsInSpace(subnetSpace(sid)); len(ips) > 0 {
			return arm.BadRequest("InUseSubnetCannotBeDeleted",
				"Subnet %s is in use and cannot be deleted. In order to delete the subnet, delete all the resources within the subnet.", arm.Str(sn, "name"))
		}
	}
	return nil
}

func findChild(doc map[string]any, field, name string) map[string]any {
	items := childItems(doc, field)
	if i := arm.FindByName(items, name); i >= 0 {
		return items[i]
	}
	return nil
}

func subnetPrefixes(sn map[string]any) []string {
	if p := arm.Str(sn, "properties", "addressPrefix"); p != "" {
		return []string{p}
	}
	return stringsAt(sn, "properties", "addressPrefixes")
}

func stringsAt(doc map[string]any, path ...string) []string {
	o := arm.Obj(doc, false, path[:len(path)-1]...)
	if o == nil {
		return nil
	}
	raw, _ := o[path[len(path)-1]].([]any)
	var out []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// privateLinkServiceSubnets returns the lower-cased IDs of the subnets that
// hold private link service NAT IP configurations.
func privateLinkServiceSubnets(tx *arm.Tx) map[string]bool {
	out := map[string]bool{}
	for _, pls := range tx.List(plsType, "") {
		for _, c := range childItems(pls, "ipConfigurations") {
			if sn := refID(arm.Props(c), "subnet"); sn != "" {
				out[arm.KeyOf(sn)] = true
			}
		}
	}
	return out
}

func subnetSpace(subnetID string) string { return "subnet:" + arm.KeyOf(subnetID) }

// IP versions as ARM spells them (privateIPAddressVersion, publicIPAddressVersion).
const (
	IPv4 = "IPv4"
	IPv6 = "IPv6"
)

// NormalizeIPVersion maps a requested IP version to IPv4 or IPv6 (empty means
// IPv4, as NRP defaults it); ok is false for anything else.
func NormalizeIPVersion(v string) (string, bool) {
	switch {
	case v == "", strings.EqualFold(v, IPv4):
		return IPv4, true
	case strings.EqualFold(v, IPv6):
		return IPv6, true
	}
	return v, false
}

// AllocatePrivateIP reserves a private IPv4 address in a subnet for owner (an
// ip configuration ID); see AllocatePrivateIPVersion.
func AllocatePrivateIP(tx *arm.Tx, subnetID, owner, want string) (string, error) {
	return AllocatePrivateIPVersion(tx, subnetID, owner, want, IPv4)
}

// AllocatePrivateIPVersion reserves a private address of the given version
// ("IPv4", "IPv6"; empty = IPv4) in a subnet for owner (an ip configuration
// ID), drawing only from the subnet's prefixes of that version: a dual-stack
// subnet lists an IPv4 and an IPv6 prefix in addressPrefixes. want = ""
// allocates dynamically (the owner keeps the address it already has);
// otherwise the static address is checked (version and range) and reserved.
// Compute handlers call this for VM / VMSS VM NICs inside an arm.Engine
// transaction (tx).
func AllocatePrivateIPVersion(tx *arm.Tx, subnetID, owner, want, version string) (string, error) {
	sn, ok := tx.GetChild(subnetID)
	if !ok {
		return "", arm.InvalidReference(subnetID, owner)
	}
	v, ok := NormalizeIPVersion(version)
	if !ok {
		return "", arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid IP version '%s' for %s; allowed values are IPv4, IPv6.", version, owner)
	}
	v6 := v == IPv6
	if want != "" {
		a, err := netip.ParseAddr(want)
		if err != nil {
			return "", arm.BadRequest("InvalidRequestFormat", "Cannot parse the IP address '%s'.", want)
		}
		if isV6 := a.Is6() && !a.Is4In6(); isV6 != v6 {
			return "", arm.BadRequest("PrivateIPAddressVersionMismatch",
				"The private IP address %s of %s does not match its privateIPAddressVersion %s.", want, owner, v)
		}
	}
	var ranges []arm.IPRange
	for _, p := range subnetPrefixes(sn) {
		r, err := arm.ParseRange(p, subnetSkipLow, subnetSkipHigh)
		if err != nil {
			return "", arm.BadRequest("InvalidAddressPrefixFormat", "%v", err)
		}
		if r.Prefix.Addr().Is6() == v6 {
			ranges = append(ranges, r)
		}
	}
	if len(ranges) == 0 {
		if v6 {
			return "", arm.BadRequest("SubnetDoesNotHaveIPv6AddressPrefix",
				"IP configuration %s with privateIPAddressVersion IPv6 references subnet %s, which has no IPv6 address prefix.", owner, subnetID)
		}
		return "", arm.BadRequest("SubnetDoesNotHaveIPv4AddressPrefix",
			"IP configuration %s with privateIPAddressVersion IPv4 references subnet %s, which has no IPv4 address prefix.", owner, subnetID)
	}
	ip, err := tx.ReserveIP(subnetSpace(subnetID), ranges, owner, want)
	if err != nil {
		if ae := (*arm.Error)(nil); errors.As(err, &ae) && ae.Code == "PrivateIPAddressNotInSubnet" {
			ae.Message = "IP address " + want + " of " + owner + " does not belong to subnet " + subnetID + "."
		}
		return "", err
	}
	return ip, nil
}

// PrivateIPOf returns the address owner holds in a subnet, if any, without
// allocating (cheap; for read paths such as derived views).
func PrivateIPOf(tx *arm.Tx, subnetID, owner string) (string, bool) {
	return tx.HeldIP(subnetSpace(subnetID), owner)
}

// ReleasePrivateIP frees the address an owner holds in a subnet.
func ReleasePrivateIP(tx *arm.Tx, subnetID, owner string) { tx.ReleaseIP(subnetSpace(subnetID), owner) }
