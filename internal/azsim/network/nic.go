package network

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func prepareInterface(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.Interface{}); err != nil {
		return err
	}
	if w.Old != nil {
		if pe := refID(arm.Props(w.Old), "privateEndpoint"); pe != "" {
			return errNICOfPrivateEndpoint(w.ID.String(), pe)
		}
		if pls := refID(arm.Props(w.Old), "privateLinkService"); pls != "" {
			return errNICOfPrivateLinkService(w.ID.String(), pls)
		}
	}
	keepResourceGUID(w)
	d, p := w.Doc, arm.Props(w.Doc)
	// Only NRP sets these (on the interfaces of private endpoints and private link services).
	delete(p, "privateEndpoint")
	delete(p, "privateLinkService")
	nicDefaults(d, w.ID.Scope())
	ipcs := childItems(d, "ipConfigurations")
	if len(ipcs) == 0 {
		return arm.BadRequest("NetworkInterfaceMustHaveAtLeastOneIpConfiguration", "Network interface %s must have at least one IP configuration.", w.ID)
	}
	if nsg := refID(p, "networkSecurityGroup"); nsg != "" && !tx.Exists(nsg) {
		return arm.InvalidReference(nsg, w.ID.String())
	}
	primaries := 0
	for _, c := range ipcs {
		if b, _ := arm.Props(c)["primary"].(bool); b {
			primaries++
		}
	}
	if primaries == 0 {
		arm.Props(ipcs[0])["primary"] = true
	} else if primaries > 1 {
		return arm.BadRequest("OnlyOnePrimaryIpConfigurationAllowedPerNic", "Network interface %s has more than one primary IP configuration.", w.ID)
	}
	var keep []string
	memberships := map[string][]string{}
	lbSkus := map[string]bool{}
	for _, c := range ipcs {
		name := arm.Str(c, "name")
		cid := w.ID.Child("ipConfigurations", name).String()
		cp := arm.Props(c)
		subnet := refID(cp, "subnet")
		if subnet == "" {
			return arm.BadRequest("IpConfigurationSubnetMissing", "IP configuration %s must reference a subnet.", cid)
		}
		// A client may send the whole subnet (as read from the virtual network); NRP keeps
		// the reference only.
		cp["subnet"] = map[string]any{"id": subnet}
		method := arm.Str(cp, "privateIPAllocationMethod")
		if method == "" {
			method = "Dynamic"
			cp["privateIPAllocationMethod"] = method
		}
		want := ""
		if strings.EqualFold(method, "Static") {
			if want = arm.Str(cp, "privateIPAddress"); want == "" {
				return arm.BadRequest("PrivateIPAddressIsNotSpecified", "IP configuration %s has static allocation but no private IP address.", cid)
			}
		}
		version, ok := NormalizeIPVersion(arm.Str(cp, "privateIPAddressVersion"))
		if !ok {
			return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid privateIPAddressVersion '%s' of %s.", version, cid)
		}
		ip, err := AllocatePrivateIPVersion(tx, subnet, cid, want, version)
		if err != nil {
			return err
		}
		cp["privateIPAddress"] = ip
		cp["privateIPAddressVersion"] = version
		keep = append(keep, cid)
		if pip := refID(cp, "publicIPAddress"); pip != "" {
			doc, ok := tx.Get(pip)
			if !ok {
				return arm.InvalidReference(pip, cid)
			}
			if pv, _ := NormalizeIPVersion(arm.Str(doc, "properties", "publicIPAddressVersion")); pv != version {
				return arm.BadRequest("IPVersionForPublicIpAndNicIpConfigurationMustMatch",
					"IP version for publicIPAddress '%s', version '%s' and network interface ipConfiguration '%s', version '%s' must match.", pip, pv, cid, version)
			}
			if other := arm.Str(doc, "properties", "ipConfiguration", "id"); other != "" && !arm.SameID(other, cid) {
				return arm.BadRequest("PublicIPAddressInUse", "Resource %s is referencing public IP address %s that is already allocated to resource %s.", cid, pip, other)
			}
		}
		pools := arm.RefIDs(cp, "loadBalancerBackendAddressPools")
		for _, pool := range pools {
			if !tx.Exists(pool) {
				return arm.InvalidReference(pool, cid)
			}
			if lbID, ok := parentID(pool); ok {
				if lb, ok := tx.Get(lbID); ok {
					lbSkus[strings.ToLower(skuNameOr(lb, "Basic"))] = true
				}
			}
		}
		for _, r := range arm.RefIDs(cp, "loadBalancerInboundNatRules") {
			if !tx.Exists(r) {
				return arm.InvalidReference(r, cid)
			}
		}
		memberships[cid] = pools
	}
	if lbSkus["basic"] && len(lbSkus) > 1 {
		return arm.BadRequest("DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed",
			"Network interface %s cannot reference load balancers with different SKUs.", w.ID)
	}
	if err := CheckRulesPerNIC(tx, memberships); err != nil {
		return err
	}
	if err := CheckNewPoolRefs(tx, nicPoolRefs(w.Old, w.ID.String()), memberships); err != nil {
		return err
	}
	tx.ReleaseIPsExcept(w.ID.String(), keep)
	carry(w, "virtualMachine", "macAddress")
	if arm.Str(p, "macAddress") == "" {
		p["macAddress"] = macAddressOf(w.ID.String())
	}
	return nil
}

// nicDefaults fills what NRP returns on every network interface; scope is the
// interface's resource group ID (it seeds the internal DNS suffix).
func nicDefaults(d map[string]any, scope string) {
	p := arm.Props(d)
	defaults(d, "kind", "Regular")
	sum := sha256.Sum256([]byte(strings.ToLower(scope)))
	defaults(p, "enableAcceleratedNetworking", false, "enableIPForwarding", false, "disableTcpStateTracking", false,
		"nicType", "Standard", "hostedWorkloads", []any{}, "tapConfigurations", []any{}, "vnetEncryptionSupported", false,
		"allowPort25Out", true, "auxiliaryMode", "None", "auxiliarySku", "None", "defaultOutboundConnectivityEnabled", false,
		"dnsSettings", map[string]any{"dnsServers": []any{}, "appliedDnsServers": []any{},
			"internalDomainNameSuffix": fmt.Sprintf("%x.bx.internal.cloudapp.net", sum[:13])})
}

func macAddressOf(nicID string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(nicID)))
	return fmt.Sprintf("00-0D-3A-%02X-%02X-%02X", sum[0], sum[1], sum[2])
}

func skuNameOr(doc map[string]any, def string) string {
	if s := skuName(doc); s != "" {
		return s
	}
	return def
}

func parentID(childID string) (string, bool) {
	id, err := arm.ParseID(childID)
	if err != nil {
		return "", false
	}
	p, ok := id.Parent()
	if !ok {
		return "", false
	}
	return p.String(), true
}

func beforeDeleteInterface(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	for _, by := range []string{"privateEndpoint", "privateLinkService"} {
		if owner := refID(arm.Props(doc), by); owner != "" {
			return arm.BadRequest("NicInUse",
				"Network Interface %s is used by existing resource %s. In order to delete the network interface, it must be dissociated from the resource. To learn more, see aka.ms/deletenic.", id, owner)
		}
	}
	if vm := arm.Str(doc, "properties", "virtualMachine", "id"); vm != "" {
		return arm.BadRequest("NicInUse",
			"Network Interface %s is used by existing resource %s. In order to delete the network interface, it must be dissociated from the resource. To learn more, see aka.ms/deletenic.", id, vm)
	}
	return nil
}

func prepareNatGateway(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.NatGateway{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	d, p := w.Doc, arm.Props(w.Doc)
	sku := arm.Obj(d, true, "sku")
	defaults(sku, "name", "Standard", "tier", "Regional")
	defaults(p, "type", "Public")
	if _, ok := p["idleTimeoutInMinutes"]; !ok {
		p["idleTimeoutInMinutes"] = 4
	}
	for _, field := range []string{"publicIpAddresses", "publicIpAddressesV6", "publicIpPrefixes", "publicIpPrefixesV6"} {
		for _, ref := range arm.RefIDs(p, field) {
			doc, ok := tx.Get(ref)
			if !ok {
				return arm.InvalidReference(ref, w.ID.String())
			}
			if strings.HasPrefix(field, "publicIpAddresses") {
				if strings.EqualFold(skuName(doc), "Basic") || skuName(doc) == "" {
					return arm.BadRequest("NatGatewayCannotUseBasicSkuPublicIp", "NAT gateway %s cannot use Basic SKU public IP %s.", w.ID, ref)
				}
				if other := arm.Str(doc, "properties", "ipConfiguration", "id"); other != "" {
					return arm.BadRequest("PublicIPAddressInUse", "Public IP address %s is already allocated to resource %s.", ref, other)
				}
				if other := arm.Str(doc, "properties", "natGateway", "id"); other != "" && !arm.SameID(other, w.ID.String()) {
					return arm.BadRequest("PublicIPAddressInUse", "Public IP address %s is already used by NAT gateway %s.", ref, other)
				}
			}
		}
	}
	if sg := refID(p, "serviceGateway"); sg != "" && !tx.Exists(sg) {
		return arm.InvalidReference(sg, w.ID.String())
	}
	carry(w, "subnets")
	return nil
}

func beforeDeleteNatGateway(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	if by := arm.RefIDs(arm.Props(doc), "subnets"); len(by) > 0 {
		return inUse("InUseNatGatewayCannotBeDeleted", "NAT gateway", id.String(), by)
	}
	return nil
}
