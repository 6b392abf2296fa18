package network

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// TestBasicToStandardPublicIPUpgrade walks the in-place upgrade a Basic → Standard load balancer
// migration makes: Static while still associated (the address stays), refused while associated,
// refused while Dynamic, accepted once dissociated with the same address, never downgraded.
func TestBasicToStandardPublicIPUpgrade(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	basicSKU := &armnetwork.PublicIPAddressSKU{Name: ptr(armnetwork.PublicIPAddressSKUNameBasic)}
	dyn := func() *armnetwork.PublicIPAddressPropertiesFormat {
		return &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: ptr(armnetwork.IPAllocationMethodDynamic)}
	}
	pip, err := v.putPIP("basic", armnetwork.PublicIPAddress{SKU: basicSKU, Properties: dyn()})
	if err != nil {
		t.Fatal(err)
	}
	basicLB := lbWithFrontend(pip.ID)
	basicLB.SKU = &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameBasic)}
	if _, err := v.putLB("basic-lb", basicLB); err != nil {
		t.Fatal(err)
	}
	// A Standard load balancer cannot use it.
	if _, err := v.putLB("std-lb", lbWithFrontend(pip.ID)); respErr(t, err).ErrorCode != "PublicIPAndLBSkuDoNotMatch" {
		t.Fatalf("standard LB on a Basic IP: %v", err)
	}
	got, err := v.net.NewPublicIPAddressesClient().Get(v.ctx, testRG, "basic", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := *got.Properties.IPAddress
	// Upgrade while associated: refused.
	up := got.PublicIPAddress
	up.SKU = stdSKU()
	up.Properties.PublicIPAllocationMethod = ptr(armnetwork.IPAllocationMethodStatic)
	if _, err := v.putPIP("basic", up); respErr(t, err).ErrorCode != "PublicIPSkuCannotBeChangedWhenAssociated" {
		t.Fatalf("upgrade while associated: %v", err)
	}
	// Dynamic → Static while associated keeps the address.
	st := got.PublicIPAddress
	st.SKU = basicSKU
	st.Properties.PublicIPAllocationMethod = ptr(armnetwork.IPAllocationMethodStatic)
	res, err := v.putPIP("basic", st)
	if err != nil {
		t.Fatal(err)
	}
	if *res.Properties.IPAddress != addr {
		t.Fatalf("static switch changed the address %s → %s", addr, *res.Properties.IPAddress)
	}
	// Dissociate (delete the Basic LB); the Static address stays.
	p, err := v.net.NewLoadBalancersClient().BeginDelete(v.ctx, testRG, "basic-lb", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	res.SKU = stdSKU()
	res.Properties.IPConfiguration = nil
	upgraded, err := v.putPIP("basic", res)
	if err != nil {
		t.Fatal(err)
	}
	if *upgraded.SKU.Name != armnetwork.PublicIPAddressSKUNameStandard || *upgraded.Properties.IPAddress != addr {
		t.Fatalf("upgrade: sku %s address %s (was %s)", *upgraded.SKU.Name, *upgraded.Properties.IPAddress, addr)
	}
	// The Standard load balancer takes it now, with the same address.
	if _, err := v.putLB("std-lb", lbWithFrontend(upgraded.ID)); err != nil {
		t.Fatal(err)
	}
	// Never downgraded.
	down := upgraded
	down.SKU = basicSKU
	down.Properties.IPConfiguration = nil
	if _, err := v.putPIP("basic", down); respErr(t, err).ErrorCode == "" {
		t.Fatal("downgrade accepted")
	}

	// A dissociated Dynamic Basic IP has lost its address: its upgrade is refused.
	if _, err := v.putPIP("dyn", armnetwork.PublicIPAddress{SKU: basicSKU, Properties: dyn()}); err != nil {
		t.Fatal(err)
	}
	d, err := v.net.NewPublicIPAddressesClient().Get(v.ctx, testRG, "dyn", nil)
	if err != nil {
		t.Fatal(err)
	}
	d.SKU = stdSKU()
	d.Properties.PublicIPAllocationMethod = ptr(armnetwork.IPAllocationMethodStatic)
	if _, err := v.putPIP("dyn", d.PublicIPAddress); respErr(t, err).ErrorCode != "PublicIPSkuUpgradeRequiresStaticAllocation" {
		t.Fatalf("dynamic upgrade: %v", err)
	}
}

func TestBasicLoadBalancerRefusesIPBasedPools(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnet := v.mustVNet("vnet")
	vnetID := subnet[:len(subnet)-len("/subnets/s1")]
	lb := armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameBasic)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: ptr("p"),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{
				Name: ptr("n1"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: ptr("10.0.1.4"),
					VirtualNetwork: &armnetwork.SubResource{ID: ptr(vnetID)}}}}}}}}}
	if _, err := v.putLB("basic", lb); respErr(t, err).ErrorCode != "BasicSkuLoadBalancerDoesNotSupportIPBasedBackendPool" {
		t.Fatalf("basic IP-based pool: %v", err)
	}
	lb.SKU.Name = ptr(armnetwork.LoadBalancerSKUNameStandard)
	if _, err := v.putLB("standard", lb); err != nil {
		t.Fatalf("standard IP-based pool: %v", err)
	}
}
