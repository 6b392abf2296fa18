package network

import (
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func strs(ps []*string) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

// VirtualNetworks_CheckIPAddressAvailability in virtualNetwork.json (example
// VirtualNetworkCheckIPAddressAvailability.json: a taken address answers available false and
// the next five free addresses of its subnet). Every kind of holder counts: NIC ip
// configurations (static and dynamic) and internal load balancer frontends.
func TestCheckIPAddressAvailability(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	vnets := v.net.NewVirtualNetworksClient()
	p, err := vnets.BeginCreateOrUpdate(v.ctx, testRG, "vnet", vnetBody("10.0.0.0/16", "s1", "10.0.1.0/24", "small", "10.0.2.0/29"), nil)
	if err != nil {
		t.Fatal(err)
	}
	vn, err := p.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	s1, small := *vn.Properties.Subnets[0].ID, *vn.Properties.Subnets[1].ID
	if _, err := v.putNIC("static", ipc("ipconfig1", s1, "", "10.0.1.4")); err != nil {
		t.Fatal(err)
	}
	if nic, err := v.putNIC("dynamic", ipc("ipconfig1", s1, "", "")); err != nil || *nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress != "10.0.1.5" {
		t.Fatalf("dynamic NIC: %v", err)
	}
	ilb := armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: ptr("fe"),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &s1},
				PrivateIPAllocationMethod: ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: ptr("10.0.1.7")}}}}}
	if _, err := v.putLB("ilb", ilb); err != nil {
		t.Fatal(err)
	}
	// The small subnet's usable addresses are .4 to .6; .5 and .6 are taken.
	if _, err := v.putNIC("s5", ipc("ipconfig1", small, "", "10.0.2.5")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.putNIC("s6", ipc("ipconfig1", small, "", "10.0.2.6")); err != nil {
		t.Fatal(err)
	}

	check := func(ip string) armnetwork.IPAddressAvailabilityResult {
		t.Helper()
		r, err := vnets.CheckIPAddressAvailability(v.ctx, testRG, "vnet", ip, nil)
		if err != nil {
			t.Fatalf("check %s: %v", ip, err)
		}
		return r.IPAddressAvailabilityResult
	}
	for _, c := range []struct {
		ip        string
		available bool
		reserved  bool
		suggested []string
	}{
		{"10.0.1.6", true, false, nil},
		{"10.0.1.4", false, false, []string{"10.0.1.6", "10.0.1.8", "10.0.1.9", "10.0.1.10", "10.0.1.11"}},
		{"10.0.1.5", false, false, []string{"10.0.1.6", "10.0.1.8", "10.0.1.9", "10.0.1.10", "10.0.1.11"}},
		{"10.0.1.7", false, false, []string{"10.0.1.8", "10.0.1.9", "10.0.1.10", "10.0.1.11", "10.0.1.12"}},
		{"10.0.1.0", false, true, []string{"10.0.1.6", "10.0.1.8", "10.0.1.9", "10.0.1.10", "10.0.1.11"}},
		{"10.0.1.3", false, true, []string{"10.0.1.6", "10.0.1.8", "10.0.1.9", "10.0.1.10", "10.0.1.11"}},
		{"10.0.1.255", false, true, []string{"10.0.1.6", "10.0.1.8", "10.0.1.9", "10.0.1.10", "10.0.1.11"}},
		{"10.0.1.254", true, false, nil},
		// After .5 comes .6 (taken) and .7 (reserved): the search goes back to the start.
		{"10.0.2.5", false, false, []string{"10.0.2.4"}},
	} {
		got := check(c.ip)
		if got.IsPlatformReserved == nil {
			t.Fatalf("%s: no isPlatformReserved", c.ip)
		}
		if *got.Available != c.available || *got.IsPlatformReserved != c.reserved {
			t.Errorf("%s: available %v reserved %v, want %v %v", c.ip, *got.Available, *got.IsPlatformReserved, c.available, c.reserved)
		}
		if c.available && got.AvailableIPAddresses != nil {
			t.Errorf("%s: a free address lists alternatives %v", c.ip, strs(got.AvailableIPAddresses))
		}
		if !c.available && !slices.Equal(strs(got.AvailableIPAddresses), c.suggested) {
			t.Errorf("%s: suggested %v, want %v", c.ip, strs(got.AvailableIPAddresses), c.suggested)
		}
	}

	for _, c := range []struct{ ip, code string }{
		{"10.0.3.5", "PrivateIPAddressNotInAnySubnet"},    // in the address space, in no subnet
		{"192.168.0.1", "PrivateIPAddressNotInAnySubnet"}, // outside the address space
		{"", "PrivateIPAddressIsNullOrEmpty"},
		{"10.0.1.300", "InvalidRequestFormat"},
	} {
		_, err := vnets.CheckIPAddressAvailability(v.ctx, testRG, "vnet", c.ip, nil)
		if re := respErr(t, err); re.StatusCode != 400 || re.ErrorCode != c.code {
			t.Errorf("%q: %d %s, want 400 %s", c.ip, re.StatusCode, re.ErrorCode, c.code)
		}
	}
	if _, err := vnets.CheckIPAddressAvailability(v.ctx, testRG, "nope", "10.0.1.4", nil); respErr(t, err).StatusCode != 404 {
		t.Errorf("missing VNet: %v", err)
	}

	// Deleting the holder frees the address.
	dp, err := v.net.NewInterfacesClient().BeginDelete(v.ctx, testRG, "static", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	if got := check("10.0.1.4"); !*got.Available {
		t.Errorf("10.0.1.4 still taken after its NIC was deleted")
	}
}

// IPv6 addresses of a dual-stack subnet are checked against its IPv6 prefix.
func TestCheckIPAddressAvailabilityIPv6(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	ds, _ := v.dualStackVNet()
	nic, err := v.putNIC("nic", ipc("v4", ds, "", ""), ipc("v6", ds, armnetwork.IPVersionIPv6, ""))
	if err != nil {
		t.Fatal(err)
	}
	v6 := *nic.Properties.IPConfigurations[1].Properties.PrivateIPAddress
	r, err := v.net.NewVirtualNetworksClient().CheckIPAddressAvailability(v.ctx, testRG, "vnet6", v6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.IPAddressAvailabilityResult; *got.Available || len(got.AvailableIPAddresses) != maxSuggestedIPs || !inPrefix(t, *got.AvailableIPAddresses[0], "fd00:0:0:1::/64") {
		t.Fatalf("%s: %+v", v6, strs(got.AvailableIPAddresses))
	}
}
