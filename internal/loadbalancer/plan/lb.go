package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// Frontend is what one IP family of a service needs on the load balancer, resolved by the caller:
// the public IP for a public LB, or the subnet (and a static address, if requested) for an
// internal one.
type Frontend struct {
	Family     naming.Family
	PublicIPID string
	SubnetID   string
	PrivateIP  netip.Addr // invalid: Dynamic allocation (or keep the current address)
}

// ApplyService makes lb (nil: not created yet) carry exactly the service's frontends, rules and
// probes, leaving everything owned by other services or users untouched. It is a writer Mutation
// once bound to its arguments.
func ApplyService(lb *armnetwork.LoadBalancer, c *Cluster, s *Service, fronts []Frontend) (*armnetwork.LoadBalancer, error) {
	internal := s.Opts.Internal
	lbName := c.LBName(internal)
	if lb == nil {
		lb = newLB(c, lbName)
	}
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	props := lb.Properties
	svcName := s.LBName()
	dual := s.DualStack()

	var (
		usedFrontends = map[string]bool{}
		usedBefore    = frontendsUsedBy(props, svcName)
		wantRules     []ruleSpec
		wantProbes    []probeSpec
	)
	for _, fr := range fronts {
		ensurePool(c, lbName, props, naming.BackendPoolName(c.ClusterName, fr.Family))
		if s.LocalPool {
			ensurePool(c, lbName, props, s.PoolName(c, fr.Family))
		}
		fe, err := ensureFrontend(c, lbName, props, s, fr, dual)
		if err != nil {
			return nil, err
		}
		usedFrontends[strings.ToLower(*fe.Name)] = true
		feID := c.childID(lbName, "frontendIPConfigurations", *fe.Name)
		rules, probes, err := desiredRules(c, lbName, s, fr.Family, feID)
		if err != nil {
			return nil, err
		}
		wantRules = append(wantRules, rules...)
		wantProbes = append(wantProbes, probes...)
	}
	if err := checkConflicts(props, svcName, wantRules); err != nil {
		return nil, err
	}

	// Rules: keep position of existing ones (so an unchanged LB compares equal), drop the
	// service's stale ones, append new ones.
	wantRule := map[string]ruleSpec{}
	for _, r := range wantRules {
		wantRule[strings.ToLower(r.name)] = r
	}
	var rules []*armnetwork.LoadBalancingRule
	for _, r := range props.LoadBalancingRules {
		name := strings.ToLower(str(r.Name))
		if spec, ok := wantRule[name]; ok {
			writeRule(c, lbName, r, spec)
			delete(wantRule, name)
			rules = append(rules, r)
			continue
		}
		if naming.OwnedByService(svcName, name) {
			continue
		}
		rules = append(rules, r)
	}
	for _, spec := range wantRules {
		if _, ok := wantRule[strings.ToLower(spec.name)]; ok {
			r := &armnetwork.LoadBalancingRule{}
			writeRule(c, lbName, r, spec)
			rules = append(rules, r)
		}
	}
	props.LoadBalancingRules = rules

	wantProbe := map[string]probeSpec{}
	for _, p := range wantProbes {
		wantProbe[strings.ToLower(p.name)] = p
	}
	if slices.ContainsFunc(wantRules, func(r ruleSpec) bool { return r.probeName == naming.SharedProbeName }) {
		wantProbe[strings.ToLower(naming.SharedProbeName)] = sharedProbeSpec(c)
		wantProbes = append(wantProbes, sharedProbeSpec(c))
	}
	var probes []*armnetwork.Probe
	for _, p := range props.Probes {
		name := strings.ToLower(str(p.Name))
		if spec, ok := wantProbe[name]; ok {
			writeProbe(p, spec)
			delete(wantProbe, name)
			probes = append(probes, p)
			continue
		}
		if naming.OwnedByService(svcName, name) {
			continue
		}
		probes = append(probes, p)
	}
	for _, spec := range wantProbes {
		if _, ok := wantProbe[strings.ToLower(spec.name)]; ok {
			p := &armnetwork.Probe{}
			writeProbe(p, spec)
			probes = append(probes, p)
			delete(wantProbe, strings.ToLower(spec.name))
		}
	}
	props.Probes = probes

	// The service's frontends it no longer uses go, unless another service's rules still use them.
	pruneFrontends(c, lbName, props, func(name string) bool {
		n := strings.ToLower(name)
		return (naming.OwnedByService(svcName, name) || usedBefore[n]) && !usedFrontends[n]
	})
	pruneSharedProbe(props)
	pruneLocalPools(props, s.Svc.Namespace, s.Svc.Name)
	keepStagedRules(c, lbName, props)
	// Level-triggered: the configured tags are put back on every write of a service.
	lb.Tags, _ = c.TagPolicy.ApplyConfig(lb.Tags)
	return lb, nil
}

// pruneLocalPools drops the dedicated (externalTrafficPolicy: Local) pools of the service that no
// rule references any more: the service went back to Cluster, moved away, or multiple load
// balancers were turned off.
func pruneLocalPools(props *armnetwork.LoadBalancerPropertiesFormat, namespace, name string) {
	referenced := map[string]bool{}
	for _, r := range props.LoadBalancingRules {
		if r.Properties == nil {
			continue
		}
		if r.Properties.BackendAddressPool != nil {
			referenced[strings.ToLower(azureid.Name(str(r.Properties.BackendAddressPool.ID)))] = true
		}
		for _, p := range r.Properties.BackendAddressPools {
			referenced[strings.ToLower(azureid.Name(str(p.ID)))] = true
		}
	}
	mine := map[string]bool{}
	for _, f := range []naming.Family{naming.IPv4, naming.IPv6} {
		mine[naming.LocalServicePoolName(namespace, name, f)] = true
	}
	props.BackendAddressPools = slices.DeleteFunc(props.BackendAddressPools, func(p *armnetwork.BackendAddressPool) bool {
		n := strings.ToLower(str(p.Name))
		return mine[n] && !referenced[n]
	})
}

// RemoveServiceAndPools is RemoveService plus the service's dedicated Local pools.
func RemoveServiceAndPools(lb *armnetwork.LoadBalancer, c *Cluster, svcLBName, namespace, name string) *armnetwork.LoadBalancer {
	out := RemoveService(lb, c, svcLBName)
	if lb != nil && lb.Properties != nil {
		pruneLocalPools(lb.Properties, namespace, name)
	}
	return out
}

// RemoveService removes everything of the service from lb: its rules and probes, and its
// frontends unless other rules still use them. It returns nil when no frontend is left, meaning
// the load balancer should be deleted (after its backend pools are emptied).
func RemoveService(lb *armnetwork.LoadBalancer, c *Cluster, svcLBName string) *armnetwork.LoadBalancer {
	if lb == nil {
		return nil
	}
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	props := lb.Properties
	lbName := str(lb.Name)
	usedBefore := frontendsUsedBy(props, svcLBName)
	props.LoadBalancingRules = slices.DeleteFunc(props.LoadBalancingRules, func(r *armnetwork.LoadBalancingRule) bool {
		return naming.OwnedByService(svcLBName, str(r.Name))
	})
	props.Probes = slices.DeleteFunc(props.Probes, func(p *armnetwork.Probe) bool {
		return naming.OwnedByService(svcLBName, str(p.Name))
	})
	// A secondary service (sharing another's IP) releases the frontend too once nothing uses it.
	pruneFrontends(c, lbName, props, func(name string) bool {
		return naming.OwnedByService(svcLBName, name) || usedBefore[strings.ToLower(name)]
	})
	pruneSharedProbe(props)
	if len(props.FrontendIPConfigurations) == 0 {
		return nil
	}
	return lb
}

// OwnsFrontend reports whether the service has a frontend or a rule on lb (the existing
// provider's test: a frontend named after it, or rules of its own on a shared frontend).
func OwnsFrontend(lb *armnetwork.LoadBalancer, svcLBName string) bool {
	if lb == nil || lb.Properties == nil {
		return false
	}
	for _, f := range lb.Properties.FrontendIPConfigurations {
		if naming.OwnedByService(svcLBName, str(f.Name)) {
			return true
		}
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if naming.OwnedByService(svcLBName, str(r.Name)) {
			return true
		}
	}
	return false
}

// ServiceFrontends returns the frontends the service's rules use (or that it owns by name).
func ServiceFrontends(lb *armnetwork.LoadBalancer, svcLBName string) []*armnetwork.FrontendIPConfiguration {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	used := frontendsUsedBy(lb.Properties, svcLBName)
	var out []*armnetwork.FrontendIPConfiguration
	for _, f := range lb.Properties.FrontendIPConfigurations {
		if used[strings.ToLower(str(f.Name))] || naming.OwnedByService(svcLBName, str(f.Name)) {
			out = append(out, f)
		}
	}
	return out
}

// frontendsUsedBy are the (lower-cased) frontend names the service's rules reference.
func frontendsUsedBy(props *armnetwork.LoadBalancerPropertiesFormat, svcLBName string) map[string]bool {
	out := map[string]bool{}
	for _, r := range props.LoadBalancingRules {
		if naming.OwnedByService(svcLBName, str(r.Name)) && r.Properties != nil && r.Properties.FrontendIPConfiguration != nil {
			out[strings.ToLower(azureid.Name(str(r.Properties.FrontendIPConfiguration.ID)))] = true
		}
	}
	return out
}

func newLB(c *Cluster, name string) *armnetwork.LoadBalancer {
	lb := &armnetwork.LoadBalancer{
		Name:       to.Ptr(name),
		Location:   to.Ptr(c.Location),
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{},
	}
	lb.Tags, _ = c.TagPolicy.ApplyConfig(nil)
	lb.ExtendedLocation = c.extendedLocation()
	return lb
}

func ensurePool(c *Cluster, lbName string, props *armnetwork.LoadBalancerPropertiesFormat, name string) {
	for _, p := range props.BackendAddressPools {
		if eqFold(str(p.Name), name) {
			return
		}
	}
	props.BackendAddressPools = append(props.BackendAddressPools, &armnetwork.BackendAddressPool{Name: to.Ptr(name)})
}

// ensureFrontend finds or creates the frontend of one family. A frontend already carrying the
// same public IP (or the same internal address) is shared, whatever its name: that is how several
// services share one IP.
func ensureFrontend(c *Cluster, lbName string, props *armnetwork.LoadBalancerPropertiesFormat, s *Service, fr Frontend, dual bool) (*armnetwork.FrontendIPConfiguration, error) {
	own := naming.FrontendName(s.LBName(), s.Subnet(), dual, fr.Family)
	var mine *armnetwork.FrontendIPConfiguration
	for _, fe := range props.FrontendIPConfigurations {
		fp := fe.Properties
		if fp == nil {
			continue
		}
		if eqFold(str(fe.Name), own) {
			mine = fe
		}
		switch {
		case fr.PublicIPID != "" && fp.PublicIPAddress != nil && eqFold(str(fp.PublicIPAddress.ID), fr.PublicIPID):
			return fe, nil
		case fr.PublicIPID == "" && fr.PrivateIP.IsValid() && fp.Subnet != nil && eqFold(str(fp.Subnet.ID), fr.SubnetID) &&
			str(fp.PrivateIPAddress) == fr.PrivateIP.String() && !eqFold(str(fe.Name), own):
			return fe, nil
		}
	}
	if mine == nil {
		mine = &armnetwork.FrontendIPConfiguration{Name: to.Ptr(own), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{}}
		if fr.PublicIPID == "" && len(c.Zones) > 0 && c.EdgeZone == "" {
			// Internal frontends are zone-redundant from creation; zones cannot change later.
			for _, z := range c.Zones {
				mine.Zones = append(mine.Zones, to.Ptr(z))
			}
		}
		props.FrontendIPConfigurations = append(props.FrontendIPConfigurations, mine)
	}
	if mine.Properties == nil {
		mine.Properties = &armnetwork.FrontendIPConfigurationPropertiesFormat{}
	}
	fp := mine.Properties
	if fr.PublicIPID != "" {
		if fp.PublicIPAddress == nil || !eqFold(str(fp.PublicIPAddress.ID), fr.PublicIPID) {
			fp.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(fr.PublicIPID)}
		}
		return mine, nil
	}
	if fr.SubnetID == "" {
		return nil, fmt.Errorf("internal frontend %s has no subnet", own)
	}
	if fp.Subnet == nil || !eqFold(str(fp.Subnet.ID), fr.SubnetID) {
		fp.Subnet = &armnetwork.Subnet{ID: to.Ptr(fr.SubnetID)}
		fp.PrivateIPAddress = nil
	}
	switch {
	case fr.PrivateIP.IsValid():
		fp.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
		fp.PrivateIPAddress = to.Ptr(fr.PrivateIP.String())
	case fp.PrivateIPAddress != nil && *fp.PrivateIPAddress != "":
		// Keep the address Azure gave: it is the service's IP now.
	default:
		fp.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodDynamic)
	}
	if fr.Family == naming.IPv6 {
		fp.PrivateIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv6)
	} else {
		fp.PrivateIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
	}
	return mine, nil
}

// checkConflicts rejects rules of other owners on the same frontend, protocol and port.
func checkConflicts(props *armnetwork.LoadBalancerPropertiesFormat, svcName string, want []ruleSpec) error {
	for _, w := range want {
		for _, r := range props.LoadBalancingRules {
			name := str(r.Name)
			if naming.OwnedByService(svcName, name) || r.Properties == nil || r.Properties.FrontendIPConfiguration == nil {
				continue
			}
			rp := r.Properties
			if !eqFold(str(rp.FrontendIPConfiguration.ID), w.frontendID) {
				continue
			}
			sameProto := rp.Protocol != nil && (*rp.Protocol == w.protocol || *rp.Protocol == armnetwork.TransportProtocolAll ||
				w.protocol == armnetwork.TransportProtocolAll)
			samePort := rp.FrontendPort != nil && (*rp.FrontendPort == w.frontendPort || *rp.FrontendPort == 0 || w.frontendPort == 0)
			if sameProto && samePort {
				return fmt.Errorf("port %d/%s on frontend %s is already used by rule %s", w.frontendPort, w.protocol, azureid.Name(w.frontendID), name)
			}
		}
	}
	return nil
}

// pruneFrontends drops frontends for which drop() holds and that no rule, NAT rule or outbound
// rule still references.
func pruneFrontends(c *Cluster, lbName string, props *armnetwork.LoadBalancerPropertiesFormat, drop func(name string) bool) {
	referenced := map[string]bool{}
	ref := func(sr *armnetwork.SubResource) {
		if sr != nil {
			referenced[strings.ToLower(azureid.Name(str(sr.ID)))] = true
		}
	}
	for _, r := range props.LoadBalancingRules {
		if r.Properties != nil {
			ref(r.Properties.FrontendIPConfiguration)
		}
	}
	for _, r := range props.InboundNatRules {
		if r.Properties != nil {
			ref(r.Properties.FrontendIPConfiguration)
		}
	}
	for _, r := range props.InboundNatPools {
		if r.Properties != nil {
			ref(r.Properties.FrontendIPConfiguration)
		}
	}
	for _, r := range props.OutboundRules {
		if r.Properties != nil {
			for _, f := range r.Properties.FrontendIPConfigurations {
				ref(f)
			}
		}
	}
	props.FrontendIPConfigurations = slices.DeleteFunc(props.FrontendIPConfigurations, func(f *armnetwork.FrontendIPConfiguration) bool {
		name := str(f.Name)
		return drop(name) && !referenced[strings.ToLower(name)]
	})
}

// pruneSharedProbe removes the shared cluster probe once no rule uses it.
func pruneSharedProbe(props *armnetwork.LoadBalancerPropertiesFormat) {
	for _, r := range props.LoadBalancingRules {
		if r.Properties != nil && r.Properties.Probe != nil && eqFold(azureid.Name(str(r.Properties.Probe.ID)), naming.SharedProbeName) {
			return
		}
	}
	props.Probes = slices.DeleteFunc(props.Probes, func(p *armnetwork.Probe) bool {
		return eqFold(str(p.Name), naming.SharedProbeName)
	})
}

// keepStagedRules: while a cluster pool moves to IP-based membership its rules use the staging
// pool (the pool itself may be empty meanwhile); a service written then keeps it so.
func keepStagedRules(c *Cluster, lbName string, props *armnetwork.LoadBalancerPropertiesFormat) {
	for _, f := range []naming.Family{naming.IPv4, naming.IPv6} {
		pool := naming.BackendPoolName(c.ClusterName, f)
		staging := naming.MigrationPoolName(pool)
		if !slices.ContainsFunc(props.BackendAddressPools, func(p *armnetwork.BackendAddressPool) bool { return eqFold(str(p.Name), staging) }) {
			continue
		}
		from, to := c.childID(lbName, "backendAddressPools", pool), c.childID(lbName, "backendAddressPools", staging)
		for _, r := range props.LoadBalancingRules {
			if r.Properties != nil && r.Properties.BackendAddressPool != nil && eqFold(str(r.Properties.BackendAddressPool.ID), from) {
				r.Properties.BackendAddressPool.ID = &to
			}
		}
	}
}
