package framework

import (
	"strconv"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Address ranges of a dual-stack environment. The IPv6 service range is a /112: kube-apiserver
// refuses IPv6 service ranges wider than 20 host bits.
const (
	DualStackServiceCIDRv4 = "10.0.0.0/24"
	DualStackServiceCIDRv6 = "fd00:10:96::/112"
	// DualStackVNetPrefixV6 and DualStackSubnetPrefixV6 are added to DefaultTopology's VNet and
	// node subnet (ULA ranges, as an Azure dual-stack VNet would use).
	DualStackVNetPrefixV6   = "fd00:db8:deca::/48"
	DualStackSubnetPrefixV6 = "fd00:db8:deca::/64"
)

// DualStackClusterArgs are the ClusterExtraArgs of a dual-stack cluster. kwokctl passes no
// service range of its own (kube-apiserver would default to 10.0.0.0/24, IPv4 only), so these
// are the only values the components see; TestDualStackClusterArgs checks the running
// apiserver allocates both families. kube-controller-manager gets the same range so that a
// node IPAM run (if ever enabled) agrees with the apiserver.
func DualStackClusterArgs() []string {
	r := DualStackServiceCIDRv4 + "," + DualStackServiceCIDRv6
	return []string{
		"kube-apiserver=service-cluster-ip-range=" + r,
		"kube-controller-manager=service-cluster-ip-range=" + r,
	}
}

// DualStackTopology is DefaultTopology with IPv6: the VNet and its node subnet get IPv6
// prefixes, and every scale-set instance's NIC a second (IPv6) ip configuration, so each
// machine (and the node the framework registers for it) has an IPv4 and an IPv6 InternalIP.
func DualStackTopology() *topology.Topology {
	return WithIPv6(DefaultTopology())
}

// WithIPv6 makes t dual-stack in place and returns it: IPv6 prefixes on every VNet and subnet
// that lack one (the first VNet gets DualStack*PrefixV6, later ones fd00:db8:<n>::/48), and
// IPv6 ip configurations on every scale set, availability set and standalone VM.
func WithIPv6(t *topology.Topology) *topology.Topology {
	for i := range t.VirtualNetworks {
		v := &t.VirtualNetworks[i]
		vnet, subnet := v6Prefixes(i)
		if !hasV6(v.AddressPrefixes) {
			v.AddressPrefixes = append(v.AddressPrefixes, vnet)
		}
		for j := range v.Subnets {
			if v.Subnets[j].AddressPrefixV6 == "" {
				v.Subnets[j].AddressPrefixV6 = subnetV6(subnet, j)
			}
		}
	}
	for i := range t.ScaleSets {
		t.ScaleSets[i].IPv6 = true
	}
	for i := range t.AvailabilitySets {
		t.AvailabilitySets[i].IPv6 = true
	}
	for i := range t.VirtualMachines {
		t.VirtualMachines[i].IPv6 = true
	}
	return t
}

// v6Prefixes are the IPv6 /48 of the i-th VNet and the base of its /64 subnets.
func v6Prefixes(i int) (vnet, subnetBase string) {
	if i == 0 {
		return DualStackVNetPrefixV6, "fd00:db8:deca"
	}
	return "fd00:db8:" + hex4(i) + "::/48", "fd00:db8:" + hex4(i)
}

// subnetV6 is the j-th /64 under a /48 base (the first is DualStackSubnetPrefixV6 for VNet 0).
func subnetV6(base string, j int) string {
	if j == 0 {
		return base + "::/64"
	}
	return base + ":" + hex4(j) + "::/64"
}

func hex4(n int) string { return strconv.FormatInt(int64(n), 16) }

func hasV6(prefixes []string) bool {
	for _, p := range prefixes {
		if strings.Contains(p, ":") {
			return true
		}
	}
	return false
}

// DualStack returns o made dual-stack: the cluster's service range has both families and the
// topology (DualStackTopology unless o has one, which is then given IPv6) gives every machine
// an IPv4 and an IPv6 address.
func DualStack(o Options) Options {
	if o.Topology == nil {
		o.Topology = DualStackTopology()
	} else {
		o.Topology = WithIPv6(o.Topology)
	}
	o.ClusterExtraArgs = append(append([]string(nil), o.ClusterExtraArgs...), DualStackClusterArgs()...)
	return o
}
