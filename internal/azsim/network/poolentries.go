package network

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// NRP lists every member of a NIC-based backend pool (each ip configuration referencing it,
// shown in backendIPConfigurations) in the pool's loadBalancerBackendAddresses too, as
//
//	{"name": n, "id": <pool>/loadBalancerBackendAddresses/<n>,
//	 "type": "Microsoft.Network/loadBalancers/backendAddressPools/loadBalancerBackendAddresses",
//	 "properties": {"networkInterfaceIPConfiguration": {"id": <ip configuration>}}}
//
// (networkInterfaceIPConfiguration is read-only in loadBalancer.json's
// LoadBalancerBackendAddressPropertiesFormat). Names follow NRP's: <NIC's resource
// group>_<NIC name><ip configuration name> for a network interface, a GUID for a scale set
// instance's ip configuration (derived here from its ID, so that it is stable).
//
// The list is NRP's, kept by the deriver: clients send back what they read (the SDK
// round-trips the entries), and an entry that only names an ip configuration is ignored, so
// a stale one never makes a member nor turns the pool IP-based. What a client does set on a
// member's entry is its adminState, kept across writes that carry it.

const poolAddressType = ns + "loadBalancers/backendAddressPools/loadBalancerBackendAddresses"

// entryIPConfig is the ip configuration an address entry names ("" for IP address entries).
func entryIPConfig(entry map[string]any) string {
	return arm.Str(entry, "properties", "networkInterfaceIPConfiguration", "id")
}

// hasAdminState reports whether an entry sets an admin state other than the default.
func hasAdminState(entry map[string]any) bool {
	s := arm.Str(entry, "properties", "adminState")
	return s != "" && !strings.EqualFold(s, "None")
}

// nicEntryName is NRP's name for the address entry of a NIC-based pool member.
func nicEntryName(ipcID string) string {
	id, err := arm.ParseID(ipcID)
	if err == nil && len(id.Types) == 2 && strings.EqualFold(id.Types[0], "networkInterfaces") && strings.EqualFold(id.Namespace, "Microsoft.Network") {
		return id.ResourceGroup + "_" + id.Names[0] + id.Names[1]
	}
	return guidOf(ipcID)
}

// guidOf formats a hash of an ID as a GUID.
func guidOf(s string) string {
	b := sha256.Sum256([]byte(strings.ToLower(s)))
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// poolAddresses returns a pool's loadBalancerBackendAddresses with one entry per member (members
// as in backendIPConfigurations, in that order) after the entries that name no ip
// configuration; cur are the entries as sent or stored, whose admin state a member's entry
// keeps. Entries naming an ip configuration that is not a member are dropped.
func poolAddresses(poolID string, members []string, cur []map[string]any) []any {
	state := map[string]any{}
	out := make([]any, 0, len(cur)+len(members))
	for _, e := range cur {
		ipc := entryIPConfig(e)
		if ipc == "" {
			out = append(out, e)
			continue
		}
		if s, ok := arm.Props(e)["adminState"]; ok && arm.Str(e, "properties", "adminState") != "" {
			state[arm.KeyOf(ipc)] = s
		}
	}
	used := map[string]bool{}
	for _, e := range out {
		used[strings.ToLower(arm.Str(e.(map[string]any), "name"))] = true
	}
	for _, m := range members {
		name := nicEntryName(m)
		if used[strings.ToLower(name)] {
			name = guidOf(m)
		}
		used[strings.ToLower(name)] = true
		props := map[string]any{"networkInterfaceIPConfiguration": map[string]any{"id": m}}
		if s, ok := state[arm.KeyOf(m)]; ok {
			props["adminState"] = s
		}
		out = append(out, map[string]any{"name": name, "id": poolID + "/loadBalancerBackendAddresses/" + name,
			"type": poolAddressType, "properties": props})
	}
	return out
}

// memberEntriesMatch reports whether a pool's entries that name ip configurations are exactly
// its members, in order (the deriver's cheap test before rebuilding the list).
func memberEntriesMatch(pool map[string]any, members []string) bool {
	i := 0
	for _, e := range arm.Arr(arm.Props(pool), "loadBalancerBackendAddresses") {
		ipc := entryIPConfig(e)
		if ipc == "" {
			continue
		}
		if i >= len(members) || ipc != members[i] || arm.Str(e, "id") == "" {
			return false
		}
		i++
	}
	return i == len(members)
}
