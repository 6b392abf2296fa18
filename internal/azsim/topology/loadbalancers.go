package topology

import (
	"strings"
)

// normalizeLoadBalancers fills the defaults of public IPs and load balancers and checks their
// references (public IPs of the load balancer's group, subnets, frontends and pools of rules).
func (t *Topology) normalizeLoadBalancers(fail func(string, ...any), need func(what, rg, name string),
	resolve func(owner, rg string, ref SubnetRef, ipv6 bool) SubnetRef) {
	t.PublicIPs = append([]PublicIP(nil), t.PublicIPs...)
	for i := range t.PublicIPs {
		p := &t.PublicIPs[i]
		need("publicIP", p.ResourceGroup, p.Name)
		p.SKU = canonical(fail, "publicIP "+p.Name+" sku", p.SKU, "Standard", "Basic", "Standard")
		p.Allocation = canonical(fail, "publicIP "+p.Name+" allocation", p.Allocation, "Static", "Static", "Dynamic")
	}
	t.LoadBalancers = append([]LoadBalancer(nil), t.LoadBalancers...)
	for i := range t.LoadBalancers {
		lb := &t.LoadBalancers[i]
		need("loadBalancer", lb.ResourceGroup, lb.Name)
		owner := "loadBalancer " + lb.Name
		lb.SKU = canonical(fail, owner+" sku", lb.SKU, "Standard", "Basic", "Standard")
		lb.Frontends = append([]Frontend(nil), lb.Frontends...)
		fronts := map[string]bool{}
		for j := range lb.Frontends {
			f := &lb.Frontends[j]
			fronts[strings.ToLower(f.Name)] = true
			switch {
			case f.Name == "":
				fail("%s: a frontend needs a name", owner)
			case f.PublicIP != "" && f.Subnet != nil:
				fail("%s: frontend %s has both publicIP and subnet", owner, f.Name)
			case f.PublicIP != "":
				if !hasPIP(t.PublicIPs, lb.ResourceGroup, f.PublicIP) {
					fail("%s: frontend %s names publicIP %s, which is not in the topology", owner, f.Name, f.PublicIP)
				}
			default:
				ref := SubnetRef{}
				if f.Subnet != nil {
					ref = *f.Subnet
				}
				r := resolve(owner+" frontend "+f.Name, lb.ResourceGroup, ref, false)
				f.Subnet = &r
			}
		}
		pools := map[string]bool{}
		for _, p := range lb.BackendPools {
			pools[strings.ToLower(p)] = true
		}
		lb.Rules = append([]Rule(nil), lb.Rules...)
		for j := range lb.Rules {
			r := &lb.Rules[j]
			if !fronts[strings.ToLower(r.Frontend)] || !pools[strings.ToLower(r.BackendPool)] {
				fail("%s: rule %s needs an existing frontend and backendPool", owner, r.Name)
			}
			r.Protocol = canonical(fail, owner+" rule "+r.Name+" protocol", r.Protocol, "Tcp", "Tcp", "Udp")
			if r.Port < 1 || r.Port > 65535 {
				fail("%s: rule %s has an invalid port %d", owner, r.Name, r.Port)
			}
			if r.BackendPort == 0 {
				r.BackendPort = r.Port
			}
		}
	}
}

// canonical returns the allowed spelling of v (def when empty).
func canonical(fail func(string, ...any), what, v, def string, allowed ...string) string {
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(a, v) {
			return a
		}
	}
	fail("%s must be one of %v, not %q", what, allowed, v)
	return v
}

func hasPIP(list []PublicIP, rg, name string) bool {
	for _, p := range list {
		if strings.EqualFold(p.ResourceGroup, rg) && strings.EqualFold(p.Name, name) {
			return true
		}
	}
	return false
}

func (t *Topology) hasPool(r PoolRef) bool {
	for _, lb := range t.LoadBalancers {
		if strings.EqualFold(lb.ResourceGroup, r.ResourceGroup) && strings.EqualFold(lb.Name, r.LoadBalancer) {
			for _, p := range lb.BackendPools {
				if strings.EqualFold(p, r.Pool) {
					return true
				}
			}
		}
	}
	return false
}

// poolID is the resource ID of a backend pool.
func (t *Topology) poolID(r PoolRef) string {
	return resID(t.SubscriptionID, r.ResourceGroup, "Microsoft.Network/loadBalancers", r.LoadBalancer) + "/backendAddressPools/" + r.Pool
}

func (t *Topology) poolRefs(refs []PoolRef) []any {
	var out []any
	for _, r := range refs {
		out = append(out, map[string]any{"id": t.poolID(r)})
	}
	return out
}

// lbRequests creates the public IPs, then the load balancers.
func (t *Topology) lbRequests() []Request {
	sub := t.SubscriptionID
	var reqs []Request
	for _, p := range t.PublicIPs {
		body := map[string]any{
			"location":   t.Location,
			"sku":        map[string]any{"name": p.SKU, "tier": "Regional"},
			"properties": map[string]any{"publicIPAllocationMethod": p.Allocation, "publicIPAddressVersion": "IPv4"},
		}
		if len(p.Tags) > 0 {
			body["tags"] = p.Tags
		}
		reqs = append(reqs, Request{Method: "PUT", Path: resID(sub, p.ResourceGroup, "Microsoft.Network/publicIPAddresses", p.Name),
			APIVersion: NetworkAPIVersion, Body: body})
	}
	for _, lb := range t.LoadBalancers {
		id := resID(sub, lb.ResourceGroup, "Microsoft.Network/loadBalancers", lb.Name)
		var fronts, pools, rules, probes []any
		for _, f := range lb.Frontends {
			props := map[string]any{}
			if f.PublicIP != "" {
				props["publicIPAddress"] = map[string]any{"id": resID(sub, lb.ResourceGroup, "Microsoft.Network/publicIPAddresses", f.PublicIP)}
			} else {
				props["subnet"] = map[string]any{"id": t.subnetID(*f.Subnet)}
				props["privateIPAllocationMethod"] = "Dynamic"
				if f.PrivateIP != "" {
					props["privateIPAllocationMethod"] = "Static"
					props["privateIPAddress"] = f.PrivateIP
				}
			}
			fronts = append(fronts, map[string]any{"name": f.Name, "properties": props})
		}
		for _, p := range lb.BackendPools {
			pools = append(pools, map[string]any{"name": p, "properties": map[string]any{}})
		}
		for _, r := range lb.Rules {
			probes = append(probes, map[string]any{"name": r.Name, "properties": map[string]any{
				"protocol": "Tcp", "port": r.BackendPort, "intervalInSeconds": 5, "numberOfProbes": 2}})
			rules = append(rules, map[string]any{"name": r.Name, "properties": map[string]any{
				"frontendIPConfiguration": map[string]any{"id": id + "/frontendIPConfigurations/" + r.Frontend},
				"backendAddressPool":      map[string]any{"id": id + "/backendAddressPools/" + r.BackendPool},
				"probe":                   map[string]any{"id": id + "/probes/" + r.Name},
				"protocol":                r.Protocol, "frontendPort": r.Port, "backendPort": r.BackendPort,
				"idleTimeoutInMinutes": 4, "enableFloatingIP": true,
			}})
		}
		props := map[string]any{"frontendIPConfigurations": fronts, "backendAddressPools": pools,
			"loadBalancingRules": rules, "probes": probes}
		reqs = append(reqs, Request{Method: "PUT", Path: id, APIVersion: NetworkAPIVersion, Body: map[string]any{
			"location": t.Location, "sku": map[string]any{"name": lb.SKU, "tier": "Regional"}, "properties": props}})
	}
	return reqs
}
