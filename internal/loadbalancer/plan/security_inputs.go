package plan

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// The inputs of ApplySecurity that depend on more than the service itself: which addresses its
// rules name, which addresses from its status are stale, and which ports other services still
// need on those addresses.

// SecurityDestinations are the NSG destination addresses of the service: its frontend addresses
// (plus its additional public IPs while its rules are wanted); for a service without floating
// IP, the InternalIPs of the nodes (nodeAddrs) instead, since traffic reaches them unchanged.
func SecurityDestinations(s *Service, frontendIPs []netip.Addr, want bool, nodeAddrs []netip.Addr) []netip.Addr {
	if s.Opts.DisableFloatingIP {
		return slices.Clone(nodeAddrs)
	}
	dsts := slices.Clone(frontendIPs)
	if want {
		dsts = append(dsts, s.Opts.AdditionalPublicIPs...)
	}
	return dsts
}

// StaleDestinations are the addresses the service no longer uses that nobody else holds (held):
// those in its status, and former (the addresses of public IPs it is releasing), that are not
// among its destinations. The status alone misses an address when a reconcile wrote the NSG for
// a new public IP and failed before the status followed: if the service then goes back, that
// public IP is released and its address is in neither the status nor the frontend. A deleted
// internal service's private address goes to the next internal service that asks, so an address
// from an old status must be left alone once someone else holds it: cleaning it would remove the
// new owner's rules. With held nil, every candidate is returned (the caller reads who holds what
// only when there are some).
func StaleDestinations(s *Service, dsts, former []netip.Addr, held map[netip.Addr]bool) []netip.Addr {
	var stale []netip.Addr
	add := func(a netip.Addr) {
		if !slices.Contains(dsts, a) && !held[a] && !slices.Contains(stale, a) {
			stale = append(stale, a)
		}
	}
	for _, ing := range s.Svc.Status.LoadBalancer.Ingress {
		if a, ok := AddrOf(&ing.IP); ok {
			add(a)
		}
	}
	for _, a := range former {
		if a.IsValid() {
			add(a)
		}
	}
	return stale
}

// ListedAddresses are the addresses of the listed public IPs (those without one are skipped).
func ListedAddresses(listed []ListedPIP) []netip.Addr {
	var out []netip.Addr
	for _, lp := range listed {
		if a, ok := PIPAddress(lp.PIP); ok {
			out = append(out, a)
		}
	}
	return out
}

// AddressesHeld are the addresses other services hold: private frontend addresses on the
// cluster's load balancers that the service does not own, and every address in other services'
// status.
func AddressesHeld(s *Service, lbs []*armnetwork.LoadBalancer, others []*v1.Service) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, lb := range lbs {
		if lb == nil || lb.Properties == nil {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if fe.Properties == nil || naming.OwnedByService(s.LBName(), str(fe.Name)) {
				continue
			}
			if a, ok := AddrOf(fe.Properties.PrivateIPAddress); ok {
				out[a] = true
			}
		}
	}
	for _, other := range others {
		if other.UID == s.Svc.UID {
			continue
		}
		for _, ing := range other.Status.LoadBalancer.Ingress {
			if a, ok := AddrOf(&ing.IP); ok {
				out[a] = true
			}
		}
	}
	return out
}

// RetainedPorts are the ports other services serve on the given destinations (a shared IP;
// node addresses when both have floating IP disabled), so cleaning the service's rules keeps
// theirs intact.
func RetainedPorts(s *Service, dsts []netip.Addr, others []*v1.Service) map[armnetwork.SecurityRuleProtocol][]int32 {
	set := map[netip.Addr]bool{}
	for _, a := range dsts {
		set[a] = true
	}
	out := map[armnetwork.SecurityRuleProtocol][]int32{}
	for _, other := range others {
		if other.UID == s.Svc.UID || other.Spec.Type != v1.ServiceTypeLoadBalancer || other.DeletionTimestamp != nil || !ServedHere(other) {
			continue
		}
		// Decided before parsing the other service's annotations: a reconcile looks at every
		// service, and parsing them all made a burst of N services cost N² parses.
		shares := s.Opts.DisableFloatingIP && strings.EqualFold(strings.TrimSpace(other.Annotations[annotations.DisableFloatingIP]), "true")
		for _, ing := range other.Status.LoadBalancer.Ingress {
			if a, ok := AddrOf(&ing.IP); ok && set[a] {
				shares = true
			}
		}
		if !shares {
			continue
		}
		ports, err := DestinationPorts(Lenient(other))
		if err != nil {
			continue
		}
		for proto, ps := range ports {
			out[proto] = append(out[proto], ps...)
		}
	}
	return out
}
