package framework

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// TestDualStackTopologySeedsBothFamilies seeds DualStackTopology into azsim in-process: every
// machine has one IPv4 address in the node subnet and one IPv6 address in its IPv6 prefix,
// IPv4 first (the order NewNode writes InternalIPs in).
func TestDualStackTopologySeedsBothFamilies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, res, err := startAzure(ctx, t.TempDir(), DualStackTopology(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if len(res.Machines) != 3 {
		t.Fatalf("%d machines, want 3", len(res.Machines))
	}
	v4 := netip.MustParsePrefix(DefaultTopology().VirtualNetworks[0].Subnets[0].AddressPrefix)
	v6 := netip.MustParsePrefix(DualStackSubnetPrefixV6)
	seen := map[string]bool{}
	for _, m := range res.Machines {
		if len(m.InternalIPs) != 2 {
			t.Errorf("%s: InternalIPs %v, want an IPv4 and an IPv6 address", m.NodeName, m.InternalIPs)
			continue
		}
		a4, err4 := netip.ParseAddr(m.InternalIPs[0])
		a6, err6 := netip.ParseAddr(m.InternalIPs[1])
		if err4 != nil || err6 != nil || !v4.Contains(a4) || !v6.Contains(a6) {
			t.Errorf("%s: InternalIPs %v, want one in %s then one in %s", m.NodeName, m.InternalIPs, v4, v6)
		}
		for _, ip := range m.InternalIPs {
			if seen[ip] {
				t.Errorf("address %s given twice", ip)
			}
			seen[ip] = true
		}
	}
}

func TestWithIPv6(t *testing.T) {
	topo := DefaultTopology()
	topo.VirtualNetworks[0].Subnets = append(topo.VirtualNetworks[0].Subnets, topology.Subnet{Name: "ilb", AddressPrefix: "10.240.16.0/24"})
	topo.VirtualNetworks = append(topo.VirtualNetworks, topology.VirtualNetwork{ResourceGroup: "rg-cluster", Name: "vnet2",
		AddressPrefixes: []string{"10.1.0.0/16", "fd00:1::/48"}, Subnets: []topology.Subnet{{Name: "s", AddressPrefix: "10.1.0.0/24", AddressPrefixV6: "fd00:1::/64"}}})
	topo.VirtualMachines = []topology.VirtualMachine{{ResourceGroup: "rg-cluster", Name: "vm0"}}
	topo = WithIPv6(topo)
	if _, err := topo.Normalize(); err != nil {
		t.Fatalf("dual-stack topology does not normalize: %v", err)
	}
	v := topo.VirtualNetworks[0]
	if !slices.Equal(v.AddressPrefixes, []string{"10.240.0.0/16", DualStackVNetPrefixV6}) {
		t.Errorf("VNet prefixes %v", v.AddressPrefixes)
	}
	if got := []string{v.Subnets[0].AddressPrefixV6, v.Subnets[1].AddressPrefixV6}; !slices.Equal(got, []string{DualStackSubnetPrefixV6, "fd00:db8:deca:1::/64"}) {
		t.Errorf("subnet IPv6 prefixes %v", got)
	}
	// Prefixes a topology already has are kept.
	if v2 := topo.VirtualNetworks[1]; !slices.Equal(v2.AddressPrefixes, []string{"10.1.0.0/16", "fd00:1::/48"}) || v2.Subnets[0].AddressPrefixV6 != "fd00:1::/64" {
		t.Errorf("second VNet changed: %+v", v2)
	}
	if !topo.ScaleSets[0].IPv6 || !topo.VirtualMachines[0].IPv6 {
		t.Error("machines not given IPv6 ip configurations")
	}
}

func TestDualStackOptions(t *testing.T) {
	o := DualStack(Options{ClusterExtraArgs: []string{"kube-apiserver=v=4"}})
	want := append([]string{"kube-apiserver=v=4"}, DualStackClusterArgs()...)
	if !slices.Equal(o.ClusterExtraArgs, want) {
		t.Errorf("ClusterExtraArgs %v, want %v", o.ClusterExtraArgs, want)
	}
	if o.Topology == nil || !o.Topology.ScaleSets[0].IPv6 {
		t.Errorf("topology not dual-stack: %+v", o.Topology)
	}
	for _, a := range DualStackClusterArgs() {
		if want := "=" + DualStackServiceCIDRv4 + "," + DualStackServiceCIDRv6; len(a) < len(want) || a[len(a)-len(want):] != want {
			t.Errorf("%s does not end in %s", a, want)
		}
	}
}
