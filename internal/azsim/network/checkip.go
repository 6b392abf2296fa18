package network

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// GET …/virtualNetworks/{vnet}/CheckIPAddressAvailability?ipAddress=… (operation
// VirtualNetworks_CheckIPAddressAvailability of virtualNetwork.json, model
// IPAddressAvailabilityResult) tells whether a private address of the network is free. Every
// address in use is in the subnets' IPAM spaces: NIC and scale set instance ip configurations,
// internal frontends, private link service NAT configurations, private endpoints and service
// gateways all allocate through AllocatePrivateIPVersion.
//
//   - free: {"available": true, "isPlatformReserved": false};
//   - in use: {"available": false, "availableIPAddresses": [up to 5 free addresses of the same
//     subnet, the first after the asked one], "isPlatformReserved": false};
//   - one of the subnet's first four or its last address: as in use, isPlatformReserved true;
//   - no ipAddress: 400 PrivateIPAddressIsNullOrEmpty (NRP's answer on public record);
//   - an address in no subnet of the network: 400 PrivateIPAddressNotInAnySubnet (the code the
//     Azure SDK for Java's fluent layer expects from this call);
//   - not an IP address: 400 InvalidRequestFormat, as for any malformed address in azsim.

const maxSuggestedIPs = 5

func vnetActions() map[string]arm.Action {
	return map[string]arm.Action{
		"checkipaddressavailability": {Methods: []string{http.MethodGet}, Handle: checkIPAddressAvailability},
	}
}

func checkIPAddressAvailability(tx *arm.Tx, id arm.ResourceID, r *arm.ActionRequest) (int, any, error) {
	raw := ""
	for k, v := range r.Request.URL.Query() {
		if strings.EqualFold(k, "ipAddress") && len(v) > 0 {
			raw = strings.TrimSpace(v[0])
		}
	}
	if raw == "" {
		return 0, nil, arm.BadRequest("PrivateIPAddressIsNullOrEmpty",
			"The private IP address of the CheckIpAddressAvailability call of virtual network %s is missing or empty: give it as the ipAddress query parameter.", id)
	}
	addr, err := netip.ParseAddr(raw)
	if err != nil {
		return 0, nil, arm.BadRequest("InvalidRequestFormat", "Cannot parse the IP address '%s'.", raw)
	}
	addr = addr.Unmap()
	vnet, ok := tx.Get(id.String())
	if !ok {
		return 0, nil, arm.NotFoundTopLevel(id)
	}
	for _, sn := range childItems(vnet, "subnets") {
		for _, p := range subnetPrefixes(sn) {
			rng, err := arm.ParseRange(p, subnetSkipLow, subnetSkipHigh)
			if err != nil || !rng.Prefix.Contains(addr) {
				continue
			}
			space := subnetSpace(arm.Str(sn, "id"))
			reserved := !rng.Usable(addr)
			_, taken := tx.IPOwner(space, addr.String())
			if !reserved && !taken {
				return http.StatusOK, map[string]any{"available": true, "isPlatformReserved": false}, nil
			}
			free := tx.FreeIPs(space, rng, addr, maxSuggestedIPs)
			list := make([]any, 0, len(free))
			for _, f := range free {
				list = append(list, f)
			}
			return http.StatusOK, map[string]any{"available": false, "availableIPAddresses": list, "isPlatformReserved": reserved}, nil
		}
	}
	return 0, nil, arm.BadRequest("PrivateIPAddressNotInAnySubnet",
		"IP address %s is not in any subnet of virtual network %s.", addr, id)
}
