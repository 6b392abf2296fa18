package plan

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// HasServiceObjects reports whether lb carries a frontend or a probe of the service.
func HasServiceObjects(lb *armnetwork.LoadBalancer, svcLBName string) bool {
	if OwnsFrontend(lb, svcLBName) {
		return true
	}
	if lb != nil && lb.Properties != nil {
		for _, p := range lb.Properties.Probes {
			if naming.OwnedByService(svcLBName, str(p.Name)) {
				return true
			}
		}
	}
	return false
}

// FrontendPublicIPGroups are the resource groups of the public IPs the service's frontends on
// the load balancers use, each once, in first-seen order. Deciding whether the service still
// has a load balancer, and which addresses its NSG rules allow, needs those public IPs listed.
func FrontendPublicIPGroups(lbs []*armnetwork.LoadBalancer, svcLBName string) []string {
	var out []string
	for _, lb := range lbs {
		for _, fe := range ServiceFrontends(lb, svcLBName) {
			if fe.Properties == nil || fe.Properties.PublicIPAddress == nil {
				continue
			}
			rg := azureid.ResourceGroup(str(fe.Properties.PublicIPAddress.ID))
			if rg != "" && !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, rg) }) {
				out = append(out, rg)
			}
		}
	}
	return out
}

// PublicIPAddresses indexes the addresses of public IPs by lower-cased resource ID.
func PublicIPAddresses(pips []*armnetwork.PublicIPAddress) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for _, p := range pips {
		if a, ok := PIPAddress(p); ok && p.ID != nil {
			out[strings.ToLower(*p.ID)] = a
		}
	}
	return out
}

// ServiceIPs are the addresses of the service's frontends on lb (public ones looked up in
// pipAddrs, by lower-cased public IP ID).
func ServiceIPs(lb *armnetwork.LoadBalancer, svcLBName string, pipAddrs map[string]netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, fe := range ServiceFrontends(lb, svcLBName) {
		p := fe.Properties
		if p == nil {
			continue
		}
		if p.PublicIPAddress != nil {
			if a, ok := pipAddrs[strings.ToLower(str(p.PublicIPAddress.ID))]; ok {
				out = append(out, a)
			}
			continue
		}
		if a, ok := AddrOf(p.PrivateIPAddress); ok {
			out = append(out, a)
		}
	}
	return out
}

// SharedFrontends are the frontends of lb that carry an IP the service asks for (the same public
// IP, the same private address), plus the frontends its own rules use: the service shares them
// with the other services whose rules use them.
func SharedFrontends(lb *armnetwork.LoadBalancer, svcLBName string, fronts []Frontend) []*armnetwork.FrontendIPConfiguration {
	var out []*armnetwork.FrontendIPConfiguration
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		fp := fe.Properties
		if fp == nil {
			continue
		}
		for _, fr := range fronts {
			pub := fr.PublicIPID != "" && fp.PublicIPAddress != nil && strings.EqualFold(str(fp.PublicIPAddress.ID), fr.PublicIPID)
			priv := fr.PublicIPID == "" && fr.PrivateIP.IsValid() && str(fp.PrivateIPAddress) == fr.PrivateIP.String()
			if pub || priv {
				out = append(out, fe)
				break
			}
		}
	}
	for _, fe := range ServiceFrontends(lb, svcLBName) {
		if !containsFrontend(out, fe) {
			out = append(out, fe)
		}
	}
	return out
}

// FrontendUsers names a frontend of the service on lb that something else uses too, and what:
// load balancing rules that are not the service's, outbound rules, inbound NAT rules and pools
// ("" and nil when nothing does). Such a frontend cannot leave lb with the service.
func FrontendUsers(lb *armnetwork.LoadBalancer, svcLBName string) (string, []string) {
	if lb == nil || lb.Properties == nil {
		return "", nil
	}
	props := lb.Properties
	for _, fe := range ServiceFrontends(lb, svcLBName) {
		feName := str(fe.Name)
		on := func(ref *armnetwork.SubResource) bool {
			return ref != nil && strings.EqualFold(azureid.Name(str(ref.ID)), feName)
		}
		var by []string
		for _, r := range props.LoadBalancingRules {
			if r.Properties != nil && on(r.Properties.FrontendIPConfiguration) && !naming.OwnedByService(svcLBName, str(r.Name)) {
				by = append(by, "load balancing rule "+str(r.Name))
			}
		}
		for _, r := range props.OutboundRules {
			if r.Properties != nil && slices.ContainsFunc(r.Properties.FrontendIPConfigurations, on) {
				by = append(by, "outbound rule "+str(r.Name))
			}
		}
		for _, r := range props.InboundNatRules {
			if r.Properties != nil && on(r.Properties.FrontendIPConfiguration) {
				by = append(by, "inbound NAT rule "+str(r.Name))
			}
		}
		for _, r := range props.InboundNatPools {
			if r.Properties != nil && on(r.Properties.FrontendIPConfiguration) {
				by = append(by, "inbound NAT pool "+str(r.Name))
			}
		}
		if len(by) > 0 {
			return feName, by
		}
	}
	return "", nil
}

func containsFrontend(list []*armnetwork.FrontendIPConfiguration, fe *armnetwork.FrontendIPConfiguration) bool {
	for _, x := range list {
		if strings.EqualFold(str(x.Name), str(fe.Name)) {
			return true
		}
	}
	return false
}

// KeepPrivateIPs pins internal frontends without a requested address to the address of the same
// family they have now (have), so a service moved to another load balancer keeps its IP.
func KeepPrivateIPs(fronts []Frontend, have []*armnetwork.FrontendIPConfiguration) {
	for i := range fronts {
		f := &fronts[i]
		if f.PrivateIP.IsValid() {
			continue
		}
		for _, fe := range have {
			if fe.Properties == nil {
				continue
			}
			if a, ok := AddrOf(fe.Properties.PrivateIPAddress); ok && a.Is6() == (f.Family == naming.IPv6) {
				f.PrivateIP = a
				break
			}
		}
	}
}

// RuleCount is the number of load balancing rules a service has on its load balancer, as
// ApplyService writes them: one per port and IP family, one per family with HA ports, none for
// ports with no_lb_rule or a service without ports.
func RuleCount(s *Service) int {
	ports := s.Svc.Spec.Ports
	if len(ports) == 0 {
		return 0
	}
	fams := max(len(s.Families()), 1)
	if s.Opts != nil && s.Opts.HAPorts {
		return fams
	}
	n := 0
	for _, p := range ports {
		if s.Opts == nil || !s.Opts.Port(p.Port).NoLBRule {
			n++
		}
	}
	return n * fams
}
