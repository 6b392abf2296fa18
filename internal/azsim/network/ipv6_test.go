package network

import (
	"net/netip"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// dualStackVNet creates a VNet with a dual-stack subnet "ds" (10.1.0.0/24 +
// fd00:0:0:1::/64) and an IPv4-only subnet "v4" and returns their IDs.
func (v *env) dualStackVNet() (ds, v4 string) {
	v.t.Helper()
	body := armnetwork.VirtualNetwork{Location: ptr(testLoc), Properties: &armnetwork.VirtualNetworkPropertiesFormat{
		AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{ptr("10.1.0.0/16"), ptr("fd00::/48")}},
		Subnets: []*armnetwork.Subnet{
			{Name: ptr("ds"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefixes: []*string{ptr("10.1.0.0/24"), ptr("fd00:0:0:1::/64")}}},
			{Name: ptr("v4"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr("10.1.1.0/24")}},
		},
	}}
	p, err := v.net.NewVirtualNetworksClient().BeginCreateOrUpdate(v.ctx, testRG, "vnet6", body, nil)
	if err != nil {
		v.t.Fatal(err)
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		v.t.Fatal(err)
	}
	return *res.Properties.Subnets[0].ID, *res.Properties.Subnets[1].ID
}

func (v *env) putNIC(name string, ipcs ...*armnetwork.InterfaceIPConfiguration) (armnetwork.Interface, error) {
	v.t.Helper()
	p, err := v.net.NewInterfacesClient().BeginCreateOrUpdate(v.ctx, testRG, name, armnetwork.Interface{Location: ptr(testLoc),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: ipcs}}, nil)
	if err != nil {
		return armnetwork.Interface{}, err
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	return res.Interface, err
}

func ipc(name, subnet string, version armnetwork.IPVersion, static string) *armnetwork.InterfaceIPConfiguration {
	c := &armnetwork.InterfaceIPConfiguration{Name: ptr(name), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
		Subnet: &armnetwork.Subnet{ID: ptr(subnet)}}}
	if version != "" {
		c.Properties.PrivateIPAddressVersion = ptr(version)
	}
	if static != "" {
		c.Properties.PrivateIPAllocationMethod = ptr(armnetwork.IPAllocationMethodStatic)
		c.Properties.PrivateIPAddress = ptr(static)
	}
	return c
}

func inPrefix(t *testing.T, addr, prefix string) bool {
	t.Helper()
	a, err := netip.ParseAddr(addr)
	if err != nil {
		t.Fatalf("bad address %q: %v", addr, err)
	}
	return netip.MustParsePrefix(prefix).Contains(a)
}

func TestIPv6PrivateAllocation(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	ds, v4only := v.dualStackVNet()

	// A dual-stack NIC: IPv4 primary, IPv6 secondary.
	nic, err := v.putNIC("nic1", ipc("ipconfig1", ds, "", ""), ipc("ipconfig-v6", ds, armnetwork.IPVersionIPv6, ""))
	if err != nil {
		t.Fatal(err)
	}
	c4, c6 := nic.Properties.IPConfigurations[0].Properties, nic.Properties.IPConfigurations[1].Properties
	if *c4.PrivateIPAddress != "10.1.0.4" || *c4.PrivateIPAddressVersion != armnetwork.IPVersionIPv4 {
		t.Errorf("IPv4 ipconfig: %s %s", *c4.PrivateIPAddress, *c4.PrivateIPAddressVersion)
	}
	if *c6.PrivateIPAddress != "fd00:0:0:1::4" || *c6.PrivateIPAddressVersion != armnetwork.IPVersionIPv6 {
		t.Errorf("IPv6 ipconfig: %s %s", *c6.PrivateIPAddress, *c6.PrivateIPAddressVersion)
	}
	// A re-PUT keeps both addresses; a second NIC gets the next ones.
	again, err := v.putNIC("nic1", ipc("ipconfig1", ds, "", ""), ipc("ipconfig-v6", ds, armnetwork.IPVersionIPv6, ""))
	if err != nil || *again.Properties.IPConfigurations[1].Properties.PrivateIPAddress != "fd00:0:0:1::4" {
		t.Fatalf("re-PUT: %v", err)
	}
	nic2, err := v.putNIC("nic2", ipc("ipconfig1", ds, armnetwork.IPVersionIPv4, ""), ipc("v6", ds, armnetwork.IPVersionIPv6, ""))
	if err != nil {
		t.Fatal(err)
	}
	if a := *nic2.Properties.IPConfigurations[1].Properties.PrivateIPAddress; a != "fd00:0:0:1::5" {
		t.Errorf("second IPv6 address %s", a)
	}
	// The subnet lists both ip configurations of each NIC.
	vnet, err := v.net.NewVirtualNetworksClient().Get(v.ctx, testRG, "vnet6", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(vnet.Properties.Subnets[0].Properties.IPConfigurations); n != 4 {
		t.Errorf("subnet ipConfigurations = %d, want 4", n)
	}

	// Static IPv6: inside the IPv6 prefix, taken, outside, wrong family.
	if _, err := v.putNIC("nic3", ipc("ipconfig1", ds, "", ""), ipc("v6", ds, armnetwork.IPVersionIPv6, "fd00:0:0:1::abcd")); err != nil {
		t.Fatalf("static IPv6: %v", err)
	}
	cases := []struct {
		name string
		ipcs []*armnetwork.InterfaceIPConfiguration
		code string
	}{
		{"static IPv6 in use", []*armnetwork.InterfaceIPConfiguration{ipc("ipconfig1", ds, "", ""), ipc("v6", ds, armnetwork.IPVersionIPv6, "fd00:0:0:1::abcd")}, "PrivateIPAddressInUse"},
		{"static IPv6 outside the subnet", []*armnetwork.InterfaceIPConfiguration{ipc("ipconfig1", ds, "", ""), ipc("v6", ds, armnetwork.IPVersionIPv6, "fd00:0:0:2::9")}, "PrivateIPAddressNotInSubnet"},
		{"IPv4 address on an IPv6 ipconfig", []*armnetwork.InterfaceIPConfiguration{ipc("ipconfig1", ds, "", ""), ipc("v6", ds, armnetwork.IPVersionIPv6, "10.1.0.50")}, "PrivateIPAddressVersionMismatch"},
		{"IPv6 address on an IPv4 ipconfig", []*armnetwork.InterfaceIPConfiguration{ipc("ipconfig1", ds, "", "fd00:0:0:1::50")}, "PrivateIPAddressVersionMismatch"},
		{"IPv6 on an IPv4-only subnet", []*armnetwork.InterfaceIPConfiguration{ipc("ipconfig1", v4only, "", ""), ipc("v6", v4only, armnetwork.IPVersionIPv6, "")}, "SubnetDoesNotHaveIPv6AddressPrefix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.putNIC("bad", c.ipcs...)
			if err == nil {
				t.Fatal("accepted")
			}
			if re := respErr(t, err); re.StatusCode != 400 || re.ErrorCode != c.code {
				t.Fatalf("got %d %s, want 400 %s", re.StatusCode, re.ErrorCode, c.code)
			}
		})
	}
	// Releasing: deleting nic2 frees fd00:0:0:1::5 for the next NIC.
	dp, err := v.net.NewInterfacesClient().BeginDelete(v.ctx, testRG, "nic2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	nic4, err := v.putNIC("nic4", ipc("ipconfig1", ds, "", ""), ipc("v6", ds, armnetwork.IPVersionIPv6, ""))
	if err != nil || *nic4.Properties.IPConfigurations[1].Properties.PrivateIPAddress != "fd00:0:0:1::5" {
		t.Fatalf("after delete: %v %+v", err, nic4.Properties)
	}
}

func TestIPv6PublicIPsAndFrontends(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	ds, v4only := v.dualStackVNet()

	pip6, err := v.putPIP("pip6", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{
		PublicIPAddressVersion: ptr(armnetwork.IPVersionIPv6)}})
	if err != nil {
		t.Fatal(err)
	}
	if !inPrefix(t, *pip6.Properties.IPAddress, "2001:db8::/32") || *pip6.Properties.PublicIPAddressVersion != armnetwork.IPVersionIPv6 {
		t.Errorf("IPv6 public IP %s", *pip6.Properties.IPAddress)
	}
	pip4, err := v.putPIP("pip4", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil {
		t.Fatal(err)
	}
	if !inPrefix(t, *pip4.Properties.IPAddress, "203.0.113.0/24") {
		t.Errorf("IPv4 public IP %s", *pip4.Properties.IPAddress)
	}
	// A NIC ipconfig must have the version of its public IP.
	bad := ipc("ipconfig1", ds, "", "")
	bad.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: pip6.ID}
	if _, err := v.putNIC("mismatch", bad); respErr(t, err).ErrorCode != "IPVersionForPublicIpAndNicIpConfigurationMustMatch" {
		t.Fatalf("version mismatch accepted: %v", err)
	}
	good := ipc("v6", ds, armnetwork.IPVersionIPv6, "")
	good.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: pip6.ID}
	if _, err := v.putNIC("match", ipc("ipconfig1", ds, "", ""), good); err != nil {
		t.Fatalf("IPv6 ipconfig with IPv6 public IP: %v", err)
	}

	// Internal dual-stack LB: one IPv4 and one IPv6 frontend on the dual-stack subnet.
	fe := func(name, subnet string, version armnetwork.IPVersion, static string) *armnetwork.FrontendIPConfiguration {
		f := &armnetwork.FrontendIPConfiguration{Name: ptr(name), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			Subnet: &armnetwork.Subnet{ID: ptr(subnet)}}}
		if version != "" {
			f.Properties.PrivateIPAddressVersion = ptr(version)
		}
		if static != "" {
			f.Properties.PrivateIPAllocationMethod = ptr(armnetwork.IPAllocationMethodStatic)
			f.Properties.PrivateIPAddress = ptr(static)
		}
		return f
	}
	ilb := func(fes ...*armnetwork.FrontendIPConfiguration) armnetwork.LoadBalancer {
		return armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
			Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: fes}}
	}
	lb, err := v.putLB("internal", ilb(fe("v4", ds, "", ""), fe("v6", ds, armnetwork.IPVersionIPv6, ""), fe("v6s", ds, armnetwork.IPVersionIPv6, "fd00:0:0:1::100")))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range lb.Properties.FrontendIPConfigurations {
		got[*f.Name] = *f.Properties.PrivateIPAddress + " " + string(*f.Properties.PrivateIPAddressVersion)
	}
	if !inPrefix(t, *lb.Properties.FrontendIPConfigurations[0].Properties.PrivateIPAddress, "10.1.0.0/24") || !inPrefix(t, *lb.Properties.FrontendIPConfigurations[1].Properties.PrivateIPAddress, "fd00:0:0:1::/64") ||
		got["v6"] == got["v6s"] || got["v6s"] != "fd00:0:0:1::100 IPv6" {
		t.Errorf("frontends %v", got)
	}
	if _, err := v.putLB("internal2", ilb(fe("v6", v4only, armnetwork.IPVersionIPv6, ""))); respErr(t, err).ErrorCode != "SubnetDoesNotHaveIPv6AddressPrefix" {
		t.Fatalf("IPv6 frontend on IPv4-only subnet: %v", err)
	}
	if _, err := v.putLB("internal3", ilb(fe("v6", ds, armnetwork.IPVersionIPv6, "fd00:0:0:1::100"))); respErr(t, err).ErrorCode != "PrivateIPAddressInUse" {
		t.Fatalf("static IPv6 frontend in use: %v", err)
	}
}
