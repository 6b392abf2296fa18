package network

import (
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

var lbArrays = []string{"frontendIPConfigurations", "backendAddressPools", "loadBalancingRules", "probes",
	"inboundNatRules", "outboundRules", "inboundNatPools"}

// lbLimits are Azure's per-load-balancer limits by SKU.
type lbLimits struct{ frontends, rules, outbound, poolSize int }

func limitsFor(sku string) lbLimits {
	if strings.EqualFold(sku, "Basic") {
		return lbLimits{frontends: 200, rules: 250, outbound: 0, poolSize: 300}
	}
	return lbLimits{frontends: 600, rules: 1500, outbound: 600, poolSize: 5000}
}

// MaxRulesPerNIC is the number of load-balancing rules that may reference one
// NIC (over all its ip configurations and all load balancers).
const MaxRulesPerNIC = 300

func prepareLoadBalancer(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.LoadBalancer{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	if err := checkExtendedLocation(w); err != nil {
		return err
	}
	d, p := w.Doc, arm.Props(w.Doc)
	sku := arm.Obj(d, true, "sku")
	if arm.Str(sku, "name") == "" {
		sku["name"] = "Basic"
	}
	if arm.Str(sku, "tier") == "" {
		sku["tier"] = "Regional"
	}
	skuName := arm.Str(sku, "name")
	switch strings.ToLower(skuName) {
	case "basic", "standard", "gateway", "service":
	default:
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid load balancer SKU '%s'.", skuName)
	}
	if w.Old != nil && !strings.EqualFold(arm.Str(w.Old, "sku", "name"), skuName) {
		return arm.BadRequest("CannotChangeSkuOfLoadBalancer", "The SKU of load balancer %s cannot be changed from %s to %s.", w.ID, arm.Str(w.Old, "sku", "name"), skuName)
	}
	for _, a := range lbArrays {
		if _, ok := p[a].([]any); !ok {
			p[a] = []any{}
		}
		seen := map[string]bool{}
		for _, it := range childItems(d, a) {
			n := strings.ToLower(arm.Str(it, "name"))
			if n == "" {
				return arm.BadRequest("InvalidRequestFormat", "Every element of %s in load balancer %s needs a name.", a, w.ID)
			}
			if seen[n] {
				return arm.BadRequest("DuplicateResourceName", "Load balancer %s has more than one %s named %s.", w.ID, strings.TrimSuffix(a, "s"), arm.Str(it, "name"))
			}
			seen[n] = true
			// The id must name this load balancer's child (clients send ids from GETs).
			delete(it, "etag")
		}
	}
	if err := checkChildNames(d, lbArrays...); err != nil {
		return err
	}
	if err := checkLBElements(w.ID, d); err != nil {
		return err
	}
	lim := limitsFor(skuName)
	fes := childItems(d, "frontendIPConfigurations")
	rules := childItems(d, "loadBalancingRules")
	if len(fes) > lim.frontends {
		return arm.BadRequest("LoadBalancerFrontendIPConfigurationCountLimitReached", "Load balancer %s has %d frontend IP configurations, more than the limit of %d.", w.ID, len(fes), lim.frontends)
	}
	if len(rules) > lim.rules {
		return arm.BadRequest("LoadBalancingRuleCountLimitReached", "Load balancer %s has %d load balancing rules, more than the limit of %d.", w.ID, len(rules), lim.rules)
	}
	if n := len(childItems(d, "outboundRules")); n > 0 && n > lim.outbound {
		return arm.BadRequest("OutboundRuleCountLimitReached", "Load balancer %s has %d outbound rules, more than the limit of %d for SKU %s.", w.ID, n, lim.outbound, skuName)
	}
	childID := func(typ, name string) string { return w.ID.Child(typ, name).String() }
	// The children of each type by key, built on first use: rules reference frontends, pools
	// and probes, and a scan per reference is quadratic on a load balancer with 1,500 rules.
	children := map[string]map[string]string{}
	inLB := func(typ, ref string) (string, bool) {
		if ref == "" {
			return "", false
		}
		byKey, ok := children[typ]
		if !ok {
			byKey = map[string]string{}
			for _, it := range childItems(d, typ) {
				id := childID(typ, arm.Str(it, "name"))
				byKey[arm.KeyOf(id)] = id
			}
			children[typ] = byKey
		}
		id, ok := byKey[arm.KeyOf(ref)]
		return id, ok
	}

	// A frontend that serves a private link service cannot go; the others show
	// which service they serve (read-only, not in the SDK model).
	plsOf := privateLinkServicesOfLB(tx, w.ID.String())
	for _, u := range plsOf {
		if _, ok := inLB("frontendIPConfigurations", u.Frontend); !ok {
			return errFrontendInUseByPLS(u.Frontend, u.Service)
		}
	}

	// Frontends: public (publicIPAddress / publicIPPrefix) or internal (subnet).
	var keepOwners []string
	public, private := 0, 0
	for _, fe := range fes {
		fid := childID("frontendIPConfigurations", arm.Str(fe, "name"))
		fp := arm.Props(fe)
		pipID, prefixID, subnetID := refID(fp, "publicIPAddress"), refID(fp, "publicIPPrefix"), refID(fp, "subnet")
		switch {
		case pipID != "":
			public++
			pip, ok := tx.Get(pipID)
			if !ok {
				return arm.InvalidReference(pipID, fid)
			}
			if err := checkFrontendExtendedLocation(d, w.ID.String(), fid, pip); err != nil {
				return err
			}
			if !strings.EqualFold(skuName, "Service") && !skuCompatible(skuName, arm.Str(pip, "sku", "name")) {
				return arm.BadRequest("PublicIPAndLBSkuDoNotMatch", "%s sku load balancer %s cannot reference %s sku publicIP %s.", skuName, w.ID, arm.Str(pip, "sku", "name"), pipID)
			}
			if other := arm.Str(pip, "properties", "ipConfiguration", "id"); other != "" && !strings.HasPrefix(strings.ToLower(other), strings.ToLower(w.ID.String())+"/") {
				return arm.BadRequest("PublicIPAddressInUse", "Resource %s is referencing public IP address %s that is already allocated to resource %s.", fid, pipID, other)
			}
			fp["publicIPAddress"] = map[string]any{"id": arm.Str(pip, "id")}
			if _, ok := fp["privateIPAllocationMethod"]; !ok {
				fp["privateIPAllocationMethod"] = "Dynamic"
			}
			delete(fp, "privateIPAddress")
		case prefixID != "":
			public++
			if !tx.Exists(prefixID) {
				return arm.InvalidReference(prefixID, fid)
			}
		case subnetID != "":
			private++
			if !tx.Exists(subnetID) {
				return arm.InvalidReference(subnetID, fid)
			}
			method := arm.Str(fp, "privateIPAllocationMethod")
			if method == "" {
				method = "Dynamic"
				fp["privateIPAllocationMethod"] = method
			}
			want := ""
			if strings.EqualFold(method, "Static") {
				want = arm.Str(fp, "privateIPAddress")
				if want == "" {
					return arm.BadRequest("PrivateIPAddressIsNotSpecified", "Frontend IP configuration %s has static allocation but no private IP address.", fid)
				}
			}
			version, ok := NormalizeIPVersion(arm.Str(fp, "privateIPAddressVersion"))
			if !ok {
				return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid privateIPAddressVersion '%s' of %s.", version, fid)
			}
			ip, err := AllocatePrivateIPVersion(tx, subnetID, fid, want, version)
			if err != nil {
				return err
			}
			fp["privateIPAddress"] = ip
			fp["privateIPAddressVersion"] = version
			keepOwners = append(keepOwners, fid)
		default:
			if !strings.EqualFold(skuName, "Gateway") {
				return arm.BadRequest("InvalidFrontendIPConfiguration", "Frontend IP configuration %s must reference a public IP address, a public IP prefix or a subnet.", fid)
			}
		}
		for _, k := range []string{"loadBalancingRules", "outboundRules", "inboundNatRules", "inboundNatPools"} {
			delete(fp, k)
		}
		setRef(fp, "privateLinkService", plsOf[arm.KeyOf(fid)].Service)
	}
	if public > 0 && private > 0 {
		return arm.BadRequest("LoadBalancerWithPublicAndPrivateFrontendIPConfigurations",
			"Load balancer %s cannot have both public and private frontend IP configurations.", w.ID)
	}
	tx.ReleaseIPsExcept(w.ID.String(), keepOwners)

	// Pools: IP-based members and read-only membership carried from the old document.
	for _, pool := range childItems(d, "backendAddressPools") {
		name := arm.Str(pool, "name")
		pid := childID("backendAddressPools", name)
		pp := arm.Props(pool)
		defaults(pp, "loadBalancerBackendAddresses", []any{})
		if vn := refID(pp, "virtualNetwork"); vn != "" && !tx.Exists(vn) {
			return arm.InvalidReference(vn, pid)
		}
		var oldPool map[string]any
		if w.Old != nil {
			oldPool = findChild(w.Old, "backendAddressPools", name)
		}
		delete(pp, "backendIPConfigurations")
		if oldPool != nil {
			if v, ok := arm.Props(oldPool)["backendIPConfigurations"]; ok {
				pp["backendIPConfigurations"] = v
			}
		}
		members := map[string]bool{}
		for _, m := range arm.RefIDs(pp, "backendIPConfigurations") {
			members[arm.KeyOf(m)] = true
		}
		nicBased := len(members) > 0
		addrs := arm.Arr(pp, "loadBalancerBackendAddresses")
		if len(addrs) > lim.poolSize {
			return arm.BadRequest("LoadBalancerBackendPoolSizeLimitReached", "Backend pool %s has %d addresses, more than the limit of %d.", pid, len(addrs), lim.poolSize)
		}
		seenAddr := map[string]bool{}
		for _, a := range addrs {
			ap := arm.Props(a)
			ip := arm.Str(ap, "ipAddress")
			if ip != "" && strings.EqualFold(skuName, "Basic") {
				return arm.BadRequest("BasicSkuLoadBalancerDoesNotSupportIPBasedBackendPool",
					"Backend address pool %s of Basic load balancer %s cannot have IP address members; IP-based pools need a Standard load balancer.", pid, w.ID)
			}
			if ip != "" && (nicBased || refID(ap, "networkInterfaceIPConfiguration") != "") {
				return arm.BadRequest("LoadBalancerBackendAddressPoolCannotMixNicAndIpBasedMembers",
					"Backend address pool %s contains network interface ip configurations and cannot also contain IP addresses.", pid)
			}
			// NIC-based entries only carry admin state for existing members:
			// membership itself changes on the NIC (or scale set), never on
			// the pool, and admin state cannot be set while creating the pool.
			// An entry without admin state is NRP's listing sent back: ignored.
			if ipc := refID(ap, "networkInterfaceIPConfiguration"); ipc != "" && ip == "" && hasAdminState(a) {
				if oldPool == nil {
					return arm.BadRequest("AdminStateNotSupportedOnNicBasedBackendPoolCreation",
						"Admin state can't be configured during the creation of NIC-based backend address pool %s; set it once the network interfaces reference the pool.", pid)
				}
				if !members[arm.KeyOf(ipc)] {
					return arm.BadRequest("NicBasedBackendAddressPoolMemberMustBeAddedOnNetworkInterface",
						"Backend address %s of pool %s references IP configuration %s, which is not a member of the pool. Backend pools configured via network interface cannot be updated as part of an operation on the backend pool; add or remove members on the network interface.", arm.Str(a, "name"), pid, ipc)
				}
			}
			if ip != "" {
				if seenAddr[ip] {
					return arm.BadRequest("DuplicateIpAddressesInBackendAddressPool", "Backend address pool %s contains IP address %s more than once.", pid, ip)
				}
				seenAddr[ip] = true
				if refID(ap, "virtualNetwork") == "" && refID(pp, "virtualNetwork") == "" && refID(ap, "subnet") == "" {
					return arm.BadRequest("BackendAddressPoolIpBasedMemberMissingVirtualNetwork", "Backend address %s of pool %s needs a virtual network.", arm.Str(a, "name"), pid)
				}
			}
			if vn := refID(ap, "virtualNetwork"); vn != "" && !tx.Exists(vn) {
				return arm.InvalidReference(vn, pid)
			}
			if sn := refID(ap, "subnet"); sn != "" && !tx.Exists(sn) {
				return arm.InvalidReference(sn, pid)
			}
			switch s := arm.Str(ap, "adminState"); {
			case s == "", strings.EqualFold(s, "None"), strings.EqualFold(s, "Up"), strings.EqualFold(s, "Down"):
			default:
				return arm.BadRequest("InvalidAdminState", "Backend address %s of pool %s has invalid adminState '%s'; allowed values are None, Up, Down.", arm.Str(a, "name"), pid, s)
			}
			if fe := refID(ap, "loadBalancerFrontendIPConfiguration"); fe != "" && !tx.Exists(fe) {
				if _, ok := inLB("frontendIPConfigurations", fe); !ok {
					return arm.InvalidReference(fe, pid)
				}
			}
		}
		pp["loadBalancerBackendAddresses"] = poolAddresses(pid, arm.RefIDs(pp, "backendIPConfigurations"), addrs)
		for _, k := range []string{"loadBalancingRules", "outboundRules", "outboundRule", "inboundNatRules"} {
			delete(pp, k)
		}
	}
	for _, pr := range childItems(d, "probes") {
		delete(arm.Props(pr), "loadBalancingRules")
	}

	// Back-references inside the load balancer.
	feRefs, poolRules, poolOut, poolNat, probeRules := index{}, index{}, index{}, index{}, index{}
	type key struct{ fe, proto, port string }
	used := map[key]string{}
	for _, r := range rules {
		rid := childID("loadBalancingRules", arm.Str(r, "name"))
		rp := arm.Props(r)
		fe, ok := inLB("frontendIPConfigurations", refID(rp, "frontendIPConfiguration"))
		if !ok {
			return arm.InvalidReference(refID(rp, "frontendIPConfiguration"), rid)
		}
		rp["frontendIPConfiguration"] = map[string]any{"id": fe}
		feRefs.add(fe+"#loadBalancingRules", rid)
		pools := append([]string{}, refID(rp, "backendAddressPool"))
		pools = append(pools, arm.RefIDs(rp, "backendAddressPools")...)
		for _, pr := range pools {
			if pr == "" {
				continue
			}
			pid, ok := inLB("backendAddressPools", pr)
			if !ok {
				return arm.InvalidReference(pr, rid)
			}
			poolRules.add(pid, rid)
		}
		if pr := refID(rp, "probe"); pr != "" {
			pid, ok := inLB("probes", pr)
			if !ok {
				return arm.InvalidReference(pr, rid)
			}
			probeRules.add(pid, rid)
		}
		proto := strings.ToLower(arm.Str(rp, "protocol"))
		port := jsonNum(rp["frontendPort"])
		k := key{strings.ToLower(fe), proto, port}
		if proto == "all" {
			k.proto = "all"
		}
		if other, dup := used[k]; dup {
			return arm.BadRequest("RulesUseSameFrontendIpConfigurationProtocolAndPort",
				"Load balancing rules %s and %s use the same frontend IP configuration, protocol %s and frontend port %s.", other, rid, arm.Str(rp, "protocol"), port)
		}
		used[k] = rid
	}
	for _, r := range childItems(d, "outboundRules") {
		rid := childID("outboundRules", arm.Str(r, "name"))
		rp := arm.Props(r)
		for _, f := range arm.RefIDs(rp, "frontendIPConfigurations") {
			fe, ok := inLB("frontendIPConfigurations", f)
			if !ok {
				return arm.InvalidReference(f, rid)
			}
			feRefs.add(fe+"#outboundRules", rid)
		}
		if pr := refID(rp, "backendAddressPool"); pr != "" {
			pid, ok := inLB("backendAddressPools", pr)
			if !ok {
				return arm.InvalidReference(pr, rid)
			}
			poolOut.add(pid, rid)
		}
	}
	for _, r := range childItems(d, "inboundNatRules") {
		rid := childID("inboundNatRules", arm.Str(r, "name"))
		rp := arm.Props(r)
		if f := refID(rp, "frontendIPConfiguration"); f != "" {
			fe, ok := inLB("frontendIPConfigurations", f)
			if !ok {
				return arm.InvalidReference(f, rid)
			}
			feRefs.add(fe+"#inboundNatRules", rid)
		}
		if pr := refID(rp, "backendAddressPool"); pr != "" {
			pid, ok := inLB("backendAddressPools", pr)
			if !ok {
				return arm.InvalidReference(pr, rid)
			}
			poolNat.add(pid, rid)
		}
		// backendIPConfiguration is owned by the deriver.
		delete(rp, "backendIPConfiguration")
		if w.Old != nil {
			if old := findChild(w.Old, "inboundNatRules", arm.Str(r, "name")); old != nil {
				if v, ok := arm.Props(old)["backendIPConfiguration"]; ok {
					rp["backendIPConfiguration"] = v
				}
			}
		}
	}
	for _, fe := range fes {
		fid := childID("frontendIPConfigurations", arm.Str(fe, "name"))
		fp := arm.Props(fe)
		for _, k := range []string{"loadBalancingRules", "outboundRules", "inboundNatRules"} {
			setRefs(fp, k, feRefs.get(fid+"#"+k))
		}
	}
	for _, pool := range childItems(d, "backendAddressPools") {
		pid := childID("backendAddressPools", arm.Str(pool, "name"))
		pp := arm.Props(pool)
		setRefs(pp, "loadBalancingRules", poolRules.get(pid))
		setRefs(pp, "outboundRules", poolOut.get(pid))
		if out := poolOut.get(pid); len(out) > 0 {
			pp["outboundRule"] = map[string]any{"id": out[0]}
		}
		setRefs(pp, "inboundNatRules", poolNat.get(pid))
	}
	for _, pr := range childItems(d, "probes") {
		pid := childID("probes", arm.Str(pr, "name"))
		setRefs(arm.Props(pr), "loadBalancingRules", probeRules.get(pid))
	}
	return checkRulesPerNIC(tx, w.ID.String(), d)
}

// skuCompatible: Basic LBs take Basic public IPs; Standard-family LBs take Standard(V2) IPs.
func skuCompatible(lbSku, pipSku string) bool {
	lbBasic := strings.EqualFold(lbSku, "Basic")
	pipBasic := pipSku == "" || strings.EqualFold(pipSku, "Basic")
	return lbBasic == pipBasic
}

func beforeDeleteLoadBalancer(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	var plss []string
	for _, u := range privateLinkServicesOfLB(tx, id.String()) {
		plss = append(plss, u.Service)
	}
	if len(plss) > 0 {
		sort.Strings(plss)
		return errLBDeleteWithPLS(id.String(), plss[0])
	}
	for _, pool := range childItems(doc, "backendAddressPools") {
		if by := arm.RefIDs(arm.Props(pool), "backendIPConfigurations"); len(by) > 0 {
			return arm.BadRequest("LoadBalancerInUseByVirtualMachineScaleSet",
				"Cannot delete load balancer %s since its backend address pool %s is in use by %s.", id, arm.Str(pool, "id"), strings.Join(by, ", "))
		}
	}
	return nil
}

// nicOf returns the NIC part of an ip configuration ID (…/networkInterfaces/n).
func nicOf(ipcID string) string {
	l := strings.ToLower(ipcID)
	if i := strings.LastIndex(l, "/ipconfigurations/"); i >= 0 {
		return l[:i]
	}
	return l
}

// checkRulesPerNIC counts, per NIC, the load-balancing rules reaching it over
// every load balancer, with lbDoc (being written, may be nil) replacing the stored
// version of lbID, and extra memberships (ipconfig → pools) overriding stored ones.
func checkRulesPerNIC(tx *arm.Tx, lbID string, lbDoc map[string]any) error {
	return checkRulesPerNICWith(tx, lbID, lbDoc, nil)
}

func checkRulesPerNICWith(tx *arm.Tx, lbID string, lbDoc map[string]any, override map[string][]string) error {
	poolRules := map[string]int{}
	count := func(lb map[string]any) {
		for _, r := range childItems(lb, "loadBalancingRules") {
			rp := arm.Props(r)
			pools := append(arm.RefIDs(rp, "backendAddressPools"), refID(rp, "backendAddressPool"))
			seen := map[string]bool{}
			for _, p := range pools {
				if p != "" && !seen[arm.KeyOf(p)] {
					seen[arm.KeyOf(p)] = true
					poolRules[arm.KeyOf(p)]++
				}
			}
		}
	}
	for _, lb := range tx.List(ns+"loadBalancers", "") {
		if lbDoc != nil && arm.SameID(arm.Str(lb, "id"), lbID) {
			continue
		}
		count(lb)
	}
	if lbDoc != nil {
		count(lbDoc)
	}
	perNIC := map[string]int{}
	if lbDoc != nil {
		// A load balancer write can push any NIC over the limit.
		for _, c := range AllIPConfigurations(tx) {
			pools := c.PoolIDs
			if o, ok := override[arm.KeyOf(c.ID)]; ok {
				pools = o
				delete(override, arm.KeyOf(c.ID))
			}
			for _, p := range pools {
				perNIC[nicOf(c.ID)] += poolRules[arm.KeyOf(p)]
			}
		}
	}
	// A NIC (or scale set instance) write only changes its own count; the
	// override holds all of its ip configurations.
	for id, pools := range override {
		for _, p := range pools {
			perNIC[nicOf(id)] += poolRules[arm.KeyOf(p)]
		}
	}
	for nic, n := range perNIC {
		if n > MaxRulesPerNIC {
			return arm.BadRequest("LoadBalancingRuleCountLimitReachedForNic",
				"Number of load balancing rules referencing network interface %s (%d) exceeds the maximum of %d.", nic, n, MaxRulesPerNIC)
		}
	}
	return nil
}

// CheckRulesPerNIC lets compute validate a scale-set VM's ip configurations
// (ipconfig ID → pool IDs) against the rules-per-NIC limit before storing them.
func CheckRulesPerNIC(tx *arm.Tx, memberships map[string][]string) error {
	o := map[string][]string{}
	for k, v := range memberships {
		o[arm.KeyOf(k)] = v
	}
	return checkRulesPerNICWith(tx, "", nil, o)
}
