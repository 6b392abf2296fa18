package network

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// IPConfiguration is an ip configuration that lives outside Microsoft.Network
// documents (e.g. a scale-set VM's NIC ip configuration, owned by compute) but
// must show in pools' backendIPConfigurations, subnets' ipConfigurations and
// public IPs' ipConfiguration.
type IPConfiguration struct {
	ID                string // e.g. …/virtualMachineScaleSets/s/virtualMachines/0/networkInterfaces/n/ipConfigurations/ipc
	SubnetID          string
	PrivateIP         string
	PublicIPID        string
	PoolIDs           []string // backend address pool IDs
	InboundNatRuleIDs []string
}

// IPConfigSource lists external ip configurations; it runs under the engine
// lock inside the network deriver.
type IPConfigSource func(tx *arm.Tx) []IPConfiguration

var (
	sourcesMu sync.Mutex
	sources   = map[*arm.Engine][]IPConfigSource{}
)

// AddIPConfigSource registers an external source of ip configurations (compute
// calls this for scale-set VMs). The deriver runs after every write, so a
// source's output is reflected as soon as its documents change.
func AddIPConfigSource(e *arm.Engine, src IPConfigSource) {
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	sources[e] = append(sources[e], src)
}

func sourcesOf(tx *arm.Tx) []IPConfigSource {
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	return append([]IPConfigSource(nil), sources[tx.Engine()]...)
}

// nicIPConfigurations lists the ip configurations of standalone NICs.
func nicIPConfigurations(tx *arm.Tx) []IPConfiguration {
	var out []IPConfiguration
	for _, nic := range tx.List(ns+"networkInterfaces", "") {
		for _, ipc := range childItems(nic, "ipConfigurations") {
			p := arm.Props(ipc)
			out = append(out, IPConfiguration{
				ID:                arm.Str(ipc, "id"),
				SubnetID:          refID(p, "subnet"),
				PrivateIP:         arm.Str(p, "privateIPAddress"),
				PublicIPID:        refID(p, "publicIPAddress"),
				PoolIDs:           arm.RefIDs(p, "loadBalancerBackendAddressPools"),
				InboundNatRuleIDs: arm.RefIDs(p, "loadBalancerInboundNatRules"),
			})
		}
	}
	return out
}

// AllIPConfigurations returns NIC ip configurations plus those of every registered source.
func AllIPConfigurations(tx *arm.Tx) []IPConfiguration {
	all := nicIPConfigurations(tx)
	for _, s := range sourcesOf(tx) {
		all = append(all, s(tx)...)
	}
	return all
}

// index maps lower-cased target IDs to sorted, de-duplicated referrer IDs.
type index map[string]*refList

type refList struct {
	ids, low []string
	sorted   bool
}

func (l *refList) Len() int           { return len(l.ids) }
func (l *refList) Less(i, j int) bool { return l.low[i] < l.low[j] }
func (l *refList) Swap(i, j int) {
	l.ids[i], l.ids[j] = l.ids[j], l.ids[i]
	l.low[i], l.low[j] = l.low[j], l.low[i]
}

func (ix index) add(target, referrer string) {
	if target == "" || referrer == "" {
		return
	}
	k := arm.KeyOf(target)
	l := ix[k]
	if l == nil {
		l = &refList{}
		ix[k] = l
	}
	l.ids = append(l.ids, referrer)
	l.low = append(l.low, strings.ToLower(referrer))
	l.sorted = false
}

// get returns the referrers of target, sorted case-insensitively and
// de-duplicated (computed once per target and cached).
func (ix index) get(target string) []string {
	l := ix[arm.KeyOf(target)]
	if l == nil {
		return nil
	}
	if !l.sorted {
		sort.Stable(l)
		ids, low := l.ids[:0], l.low[:0]
		for i := range l.ids {
			if i == 0 || l.low[i] != low[len(low)-1] {
				ids, low = append(ids, l.ids[i]), append(low, l.low[i])
			}
		}
		l.ids, l.low, l.sorted = ids, low, true
	}
	return l.ids
}

// derive recomputes every cross-resource read-only field. It is the single
// place where back-references are maintained; it only touches documents
// whose derived fields actually change (tx.Update renews etags only then).
func derive(tx *arm.Tx, changed []string) {
	relevant := false
	for _, k := range changed {
		if strings.Contains(k, "/providers/microsoft.") || strings.Contains(k, "/resourcegroups/") {
			relevant = true
			break
		}
	}
	if !relevant {
		return
	}
	ipcs := AllIPConfigurations(tx)
	subnetIPC, poolIPC, pipIPC, natRuleIPC := index{}, index{}, index{}, index{}
	ipBased := ipBasedPools(tx)
	for _, c := range ipcs {
		subnetIPC.add(c.SubnetID, c.ID)
		pipIPC.add(c.PublicIPID, c.ID)
		for _, p := range c.PoolIDs {
			if !ipBased[arm.KeyOf(p)] { // a stale reference to an IP-based pool makes no member
				poolIPC.add(p, c.ID)
			}
		}
		for _, r := range c.InboundNatRuleIDs {
			natRuleIPC.add(r, c.ID)
		}
	}
	nsgSubnets, nsgNICs, rtSubnets, natSubnets, pipNat := index{}, index{}, index{}, index{}, index{}
	for _, vnet := range tx.List(ns+"virtualNetworks", "") {
		for _, sn := range childItems(vnet, "subnets") {
			p := arm.Props(sn)
			nsgSubnets.add(refID(p, "networkSecurityGroup"), arm.Str(sn, "id"))
			rtSubnets.add(refID(p, "routeTable"), arm.Str(sn, "id"))
			natSubnets.add(refID(p, "natGateway"), arm.Str(sn, "id"))
		}
	}
	for _, nic := range tx.List(ns+"networkInterfaces", "") {
		nsgNICs.add(refID(arm.Props(nic), "networkSecurityGroup"), arm.Str(nic, "id"))
	}
	for _, lb := range tx.List(ns+"loadBalancers", "") {
		for _, fe := range childItems(lb, "frontendIPConfigurations") {
			p := arm.Props(fe)
			subnetIPC.add(refID(p, "subnet"), arm.Str(fe, "id"))
			pipIPC.add(refID(p, "publicIPAddress"), arm.Str(fe, "id"))
		}
	}
	for _, ng := range tx.List(ns+"natGateways", "") {
		for _, pip := range arm.RefIDs(arm.Props(ng), "publicIpAddresses") {
			pipNat.add(pip, arm.Str(ng, "id"))
		}
		for _, pip := range arm.RefIDs(arm.Props(ng), "publicIpAddressesV6") {
			pipNat.add(pip, arm.Str(ng, "id"))
		}
	}

	for _, vnet := range tx.List(ns+"virtualNetworks", "") {
		differs := false
		for _, sn := range childItems(vnet, "subnets") {
			differs = differs || !sameRefs(arm.Props(sn), "ipConfigurations", subnetIPC.get(arm.Str(sn, "id")))
		}
		if differs {
			tx.Modify(arm.Str(vnet, "id"), func(doc map[string]any) {
				for _, sn := range childItems(doc, "subnets") {
					setRefs(arm.Props(sn), "ipConfigurations", subnetIPC.get(arm.Str(sn, "id")))
				}
			})
		}
	}
	syncRefs := func(typ string, fields map[string]index) {
		for _, doc := range tx.List(ns+typ, "") {
			id := arm.Str(doc, "id")
			differs := false
			for k, ix := range fields {
				differs = differs || !sameRefs(arm.Props(doc), k, ix.get(id))
			}
			if differs {
				tx.Modify(id, func(doc map[string]any) {
					for k, ix := range fields {
						setRefs(arm.Props(doc), k, ix.get(id))
					}
				})
			}
		}
	}
	syncRefs("networkSecurityGroups", map[string]index{"subnets": nsgSubnets, "networkInterfaces": nsgNICs})
	syncRefs("routeTables", map[string]index{"subnets": rtSubnets})
	syncRefs("natGateways", map[string]index{"subnets": natSubnets})
	// A prefix lists the public IPs allocated from it (publicIPAddresses in publicIpPrefix.json).
	prefixPIPs := index{}
	for _, pip := range tx.List(ns+"publicIPAddresses", "") {
		prefixPIPs.add(refID(arm.Props(pip), "publicIPPrefix"), arm.Str(pip, "id"))
	}
	syncRefs("publicIPPrefixes", map[string]index{"publicIPAddresses": prefixPIPs})
	for _, pip := range tx.List(ns+"publicIPAddresses", "") {
		id := arm.Str(pip, "id")
		ipc, nat := first(pipIPC.get(id)), first(pipNat.get(id))
		p := arm.Props(pip)
		dynamic := strings.EqualFold(arm.Str(p, "publicIPAllocationMethod"), "Dynamic")
		needIP := dynamic && ((ipc != "") != (arm.Str(p, "ipAddress") != ""))
		if arm.Str(p, "ipConfiguration", "id") == ipc && arm.Str(p, "natGateway", "id") == nat && !needIP {
			continue
		}
		tx.Modify(id, func(doc map[string]any) {
			p := arm.Props(doc)
			setRef(p, "ipConfiguration", ipc)
			setRef(p, "natGateway", nat)
			assignDynamicIP(tx, id, doc)
		})
	}
	for _, lb := range tx.List(ns+"loadBalancers", "") {
		differs := false
		for _, pool := range childItems(lb, "backendAddressPools") {
			members := poolIPC.get(arm.Str(pool, "id"))
			differs = differs || !sameRefs(arm.Props(pool), "backendIPConfigurations", members) || !memberEntriesMatch(pool, members)
		}
		for _, r := range childItems(lb, "inboundNatRules") {
			differs = differs || arm.Str(r, "properties", "backendIPConfiguration", "id") != first(natRuleIPC.get(arm.Str(r, "id")))
		}
		if !differs {
			continue
		}
		tx.Modify(arm.Str(lb, "id"), func(doc map[string]any) {
			for _, pool := range childItems(doc, "backendAddressPools") {
				members := poolIPC.get(arm.Str(pool, "id"))
				pp := arm.Props(pool)
				setRefs(pp, "backendIPConfigurations", members)
				pp["loadBalancerBackendAddresses"] = poolAddresses(arm.Str(pool, "id"), members, arm.Arr(pp, "loadBalancerBackendAddresses"))
			}
			for _, r := range childItems(doc, "inboundNatRules") {
				setRef(arm.Props(r), "backendIPConfiguration", first(natRuleIPC.get(arm.Str(r, "id"))))
			}
		})
	}
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// setRef sets a single {"id": …} reference, or removes it when id is empty.
func setRef(props map[string]any, key, id string) {
	if id == "" {
		delete(props, key)
		return
	}
	props[key] = map[string]any{"id": id}
}

// sameRefs reports whether props[key] holds exactly the references ids.
func sameRefs(props map[string]any, key string, ids []string) bool {
	cur := arm.RefIDs(props, key)
	if len(cur) != len(ids) {
		return false
	}
	for i := range cur {
		if cur[i] != ids[i] {
			return false
		}
	}
	return true
}

func numberOf(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

func jsonNum(v any) string {
	switch n := v.(type) {
	case json.Number:
		return n.String()
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// assignDynamicIP gives a Dynamic public IP an address while it is associated
// and takes it back when it is not (Basic SKU semantics).
func assignDynamicIP(tx *arm.Tx, id string, doc map[string]any) {
	p := arm.Props(doc)
	if !strings.EqualFold(arm.Str(p, "publicIPAllocationMethod"), "Dynamic") {
		return
	}
	space, ranges := publicSpace(isV6(doc))
	if arm.Str(p, "ipConfiguration", "id") == "" {
		tx.ReleaseIP(space, id)
		delete(p, "ipAddress")
		return
	}
	if ip, err := tx.ReserveIP(space, ranges, id, ""); err == nil {
		p["ipAddress"] = ip
	}
}
