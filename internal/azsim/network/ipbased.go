package network

import (
	"net/http"
	"sort"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// A backend pool is NIC-based (network interface ip configurations reference it) or IP-based
// (its loadBalancerBackendAddresses hold IP addresses), never both:
//
//   - an ip configuration may not start referencing an IP-based pool
//     (CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool, Azure's
//     code); a reference it already had is left alone and no longer makes it a member (a scale
//     set instance keeps its model's reference after migrateToIpBased until its model changes);
//   - POST …/loadBalancers/{lb}/migrateToIpBased {"pools": [...]} turns NIC-based pools into
//     IP-based ones in one step: each member becomes an address entry (its private IP in its
//     virtual network) and the standalone NICs lose the pool reference. Scale set instances and
//     models are not touched (their references are then stale, as above). The answer is 200
//     {"migratedPools": [...]}, the pools that had members. An unknown pool is a 400
//     (BackendAddressPoolNotFound, azsim's code); a Basic load balancer too
//     (BasicSkuLoadBalancerDoesNotSupportIPBasedBackendPool).

// ipBasedPools are the (lower-case) IDs of pools holding IP address entries.
func ipBasedPools(tx *arm.Tx) map[string]bool {
	out := map[string]bool{}
	for _, lb := range tx.List(ns+"loadBalancers", "") {
		for _, pool := range childItems(lb, "backendAddressPools") {
			if poolIsIPBased(pool) {
				out[arm.KeyOf(arm.Str(pool, "id"))] = true
			}
		}
	}
	return out
}

func poolIsIPBased(pool map[string]any) bool {
	for _, a := range arm.Arr(arm.Props(pool), "loadBalancerBackendAddresses") {
		if arm.Str(a, "properties", "ipAddress") != "" {
			return true
		}
	}
	return false
}

// CheckNewPoolRefs refuses ip configurations (ID → pool IDs) that start referencing an
// IP-based pool; old holds the references before the write (nil on create).
func CheckNewPoolRefs(tx *arm.Tx, old, cur map[string][]string) error {
	var ipBased map[string]bool
	before := map[string][]string{}
	for ipc, pools := range old {
		before[arm.KeyOf(ipc)] = pools
	}
	for ipc, pools := range cur {
		had := map[string]bool{}
		for _, p := range before[arm.KeyOf(ipc)] {
			had[arm.KeyOf(p)] = true
		}
		for _, p := range pools {
			if had[arm.KeyOf(p)] {
				continue
			}
			if ipBased == nil {
				ipBased = ipBasedPools(tx)
			}
			if ipBased[arm.KeyOf(p)] {
				return arm.BadRequest("CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool",
					"IP configuration %s cannot reference backend address pool %s, which holds IP addresses: a pool is either NIC-based or IP-based.", ipc, p)
			}
		}
	}
	return nil
}

// nicPoolRefs maps a NIC document's ip configurations to the pools they reference.
func nicPoolRefs(doc map[string]any, nicID string) map[string][]string {
	if doc == nil {
		return nil
	}
	out := map[string][]string{}
	for _, ipc := range childItems(doc, "ipConfigurations") {
		out[nicID+"/ipConfigurations/"+arm.Str(ipc, "name")] = arm.RefIDs(arm.Props(ipc), "loadBalancerBackendAddressPools")
	}
	return out
}

func loadBalancerActions() map[string]arm.Action {
	return map[string]arm.Action{"migratetoipbased": {Handle: migrateToIPBased}}
}

func migrateToIPBased(tx *arm.Tx, id arm.ResourceID, r *arm.ActionRequest) (int, any, error) {
	lb, ok := tx.Get(id.String())
	if !ok {
		return 0, nil, arm.NotFoundTopLevel(id)
	}
	var names []string
	if r.Body != nil {
		if raw, ok := r.Body["pools"].([]any); ok {
			for _, v := range raw {
				if s, ok := v.(string); ok && s != "" {
					names = append(names, s)
				}
			}
		}
	}
	if len(names) == 0 {
		return 0, nil, arm.BadRequest("InvalidRequestContent", "The request content was invalid: it needs the names of the pools to migrate.")
	}
	if strings.EqualFold(arm.Str(lb, "sku", "name"), "Basic") || arm.Str(lb, "sku", "name") == "" {
		return 0, nil, arm.BadRequest("BasicSkuLoadBalancerDoesNotSupportIPBasedBackendPool",
			"Load balancer %s is Basic: IP-based backend pools need a Standard load balancer.", id)
	}
	members := map[string]IPConfiguration{}
	for _, c := range AllIPConfigurations(tx) {
		members[arm.KeyOf(c.ID)] = c
	}
	migrated := []any{}
	nicEdits := map[string][]string{} // NIC ID → pool IDs to drop
	var poolIDs []string
	for _, name := range names {
		pool := findChild(lb, "backendAddressPools", name)
		if pool == nil {
			return 0, nil, arm.BadRequest("BackendAddressPoolNotFound", "Load balancer %s has no backend address pool %s.", id, name)
		}
		refs := arm.RefIDs(arm.Props(pool), "backendIPConfigurations")
		if len(refs) == 0 {
			continue
		}
		poolIDs = append(poolIDs, arm.Str(pool, "id"))
		migrated = append(migrated, arm.Str(pool, "name"))
		for _, ref := range refs {
			if c, ok := members[arm.KeyOf(ref)]; ok && strings.Contains(strings.ToLower(c.ID), "/providers/microsoft.network/networkinterfaces/") {
				nic := nicOf(c.ID)
				nicEdits[nic] = append(nicEdits[nic], arm.Str(pool, "id"))
			}
		}
	}
	err := tx.Update(id.String(), func(doc map[string]any) error {
		for _, name := range names {
			pool := findChild(doc, "backendAddressPools", name)
			pp := arm.Props(pool)
			refs := arm.RefIDs(pp, "backendIPConfigurations")
			if len(refs) == 0 {
				continue
			}
			var entries []any
			vnet := ""
			sort.Strings(refs)
			for _, ref := range refs {
				c, ok := members[arm.KeyOf(ref)]
				if !ok || c.PrivateIP == "" {
					continue
				}
				v := vnetOfSubnet(c.SubnetID)
				if vnet == "" {
					vnet = v
				}
				entry := map[string]any{"name": memberEntryName(c.ID), "properties": map[string]any{
					"ipAddress": c.PrivateIP, "virtualNetwork": map[string]any{"id": v}}}
				entries = append(entries, entry)
			}
			pp["loadBalancerBackendAddresses"] = entries
			if vnet != "" {
				pp["virtualNetwork"] = map[string]any{"id": vnet}
			}
			delete(pp, "backendIPConfigurations")
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	for nic, pools := range nicEdits {
		drop := map[string]bool{}
		for _, p := range pools {
			drop[arm.KeyOf(p)] = true
		}
		if err := tx.Update(nic, func(doc map[string]any) error {
			for _, ipc := range childItems(doc, "ipConfigurations") {
				p := arm.Props(ipc)
				var keep []string
				for _, ref := range arm.RefIDs(p, "loadBalancerBackendAddressPools") {
					if !drop[arm.KeyOf(ref)] {
						keep = append(keep, ref)
					}
				}
				setRefs(p, "loadBalancerBackendAddressPools", keep)
			}
			return nil
		}); err != nil {
			return 0, nil, err
		}
	}
	for _, p := range poolIDs {
		tx.MarkChanged(p)
	}
	return http.StatusOK, map[string]any{"migratedPools": migrated}, nil
}

// memberEntryName names the address entry of a migrated member after its NIC (or scale set
// instance) and ip configuration.
func memberEntryName(ipcID string) string {
	parts := strings.Split(ipcID, "/")
	n := len(parts)
	if n >= 4 {
		name := parts[n-3] + "_" + parts[n-1]
		if i := strings.Index(strings.ToLower(ipcID), "/virtualmachines/"); i >= 0 && n >= 7 {
			name = parts[n-7] + "_" + parts[n-5] + "_" + parts[n-1]
		}
		return name
	}
	return ipcID
}

// vnetOfSubnet is the virtual network ID of a subnet ID.
func vnetOfSubnet(subnetID string) string {
	if i := strings.Index(strings.ToLower(subnetID), "/subnets/"); i >= 0 {
		return subnetID[:i]
	}
	return ""
}
