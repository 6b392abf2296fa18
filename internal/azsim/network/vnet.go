package network

import (
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
		for _, ref := range []string{"networkSecurityGroup", "routeTable", "natGateway", "serviceGateway"} {
			if err := requireRef(tx, refID(props, ref), sid); err != nil {
				return err
			}
		}
		// Read-only fields are recomputed by the deriver; keep the old values until then.
		if w.Old != nil {
			if old := findChild(w.Old, "subnets", name); old != nil {
				if v, ok := arm.Props(old)["ipConfigurations"]; ok {
					props["ipConfigurations"] = v
				} else {
					delete(props, "ipConfigurations")
				}
			}
		} else {
			delete(props, "ipConfigurations")
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

func subnetSpace(subnetID string) string { return "subnet:" + arm.KeyOf(subnetID) }

// AllocatePrivateIP reserves a private address in a subnet for owner (an ip
// configuration ID). want = "" allocates dynamically (the owner keeps the
// address it already has); otherwise the static address is checked and
// reserved. Compute handlers call this for VM / VMSS VM NICs inside an
// arm.Engine transaction (tx).
func AllocatePrivateIP(tx *arm.Tx, subnetID, owner, want string) (string, error) {
	sn, ok := tx.GetChild(subnetID)
	if !ok {
		return "", arm.InvalidReference(subnetID, owner)
	}
	var ranges []arm.IPRange
	for _, p := range subnetPrefixes(sn) {
		r, err := arm.ParseRange(p, subnetSkipLow, subnetSkipHigh)
		if err != nil {
			return "", arm.BadRequest("InvalidAddressPrefixFormat", "%v", err)
		}
		ranges = append(ranges, r)
	}
	ip, err := tx.ReserveIP(subnetSpace(subnetID), ranges, owner, want)
	if err != nil {
		if ae, ok := err.(*arm.Error); ok && ae.Code == "PrivateIPAddressNotInSubnet" {
			ae.Message = "IP address " + want + " of " + owner + " does not belong to subnet " + subnetID + "."
		}
		return "", err
	}
	return ip, nil
}

// ReleasePrivateIP frees the address an owner holds in a subnet.
func ReleasePrivateIP(tx *arm.Tx, subnetID, owner string) { tx.ReleaseIP(subnetSpace(subnetID), owner) }

// releaseStaleSubnetIPs frees addresses owned under resourceID by ip
// configurations that are not in keep (after a full replacement PUT).
func releaseStale(tx *arm.Tx, resourceID string, keep []string) {
	tx.ReleaseIPsExcept(resourceID, keep)
}

func lower(s string) string { return strings.ToLower(s) }
