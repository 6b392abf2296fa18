package network

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func (v *env) mustVNet(name string) string {
	v.t.Helper()
	p, err := v.net.NewVirtualNetworksClient().BeginCreateOrUpdate(v.ctx, testRG, name, vnetBody("10.0.0.0/16", "s1", "10.0.1.0/24"), nil)
	if err != nil {
		v.t.Fatal(err)
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		v.t.Fatal(err)
	}
	return *res.Properties.Subnets[0].ID
}

func (v *env) putPIP(name string, pip armnetwork.PublicIPAddress) (armnetwork.PublicIPAddress, error) {
	v.t.Helper()
	if pip.Location == nil {
		pip.Location = ptr(testLoc)
	}
	p, err := v.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(v.ctx, testRG, name, pip, nil)
	if err != nil {
		return armnetwork.PublicIPAddress{}, err
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	return res.PublicIPAddress, err
}

func (v *env) putLB(name string, lb armnetwork.LoadBalancer) (armnetwork.LoadBalancer, error) {
	v.t.Helper()
	if lb.Location == nil {
		lb.Location = ptr(testLoc)
	}
	p, err := v.net.NewLoadBalancersClient().BeginCreateOrUpdate(v.ctx, testRG, name, lb, nil)
	if err != nil {
		return armnetwork.LoadBalancer{}, err
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	return res.LoadBalancer, err
}

func stdSKU() *armnetwork.PublicIPAddressSKU {
	return &armnetwork.PublicIPAddressSKU{Name: ptr(armnetwork.PublicIPAddressSKUNameStandard)}
}

func TestPublicIPAllocation(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	a, err := v.putPIP("a", armnetwork.PublicIPAddress{SKU: stdSKU(), Zones: []*string{ptr("1"), ptr("2")},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{DNSSettings: &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: ptr("svc1")}}})
	if err != nil {
		t.Fatal(err)
	}
	p := a.Properties
	if *p.IPAddress != "203.0.113.1" || *p.PublicIPAllocationMethod != armnetwork.IPAllocationMethodStatic || *p.DNSSettings.Fqdn != "svc1.eastus.cloudapp.azure.com" || len(a.Zones) != 2 {
		t.Fatalf("unexpected %s %s %s %d", *p.IPAddress, *p.PublicIPAllocationMethod, *p.DNSSettings.Fqdn, len(a.Zones))
	}
	b, err := v.putPIP("b", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil || *b.Properties.IPAddress != "203.0.113.2" {
		t.Fatalf("second ip %v %v", err, b.Properties)
	}
	// Re-PUT keeps the address.
	if a2, err := v.putPIP("a", a); err != nil || *a2.Properties.IPAddress != "203.0.113.1" {
		t.Fatalf("re-put %v", err)
	}
	// Same DNS label elsewhere is rejected.
	_, err = v.putPIP("c", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{DNSSettings: &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: ptr("svc1")}}})
	if re := respErr(t, err); re.ErrorCode != "DnsRecordInUse" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	// Standard + Dynamic is invalid.
	_, err = v.putPIP("d", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: ptr(armnetwork.IPAllocationMethodDynamic)}})
	if re := respErr(t, err); re.ErrorCode != "StandardSkuPublicIPAddressesMustBeStatic" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	// Basic defaults to Dynamic without an address.
	basic, err := v.putPIP("basic", armnetwork.PublicIPAddress{})
	if err != nil || *basic.SKU.Name != armnetwork.PublicIPAddressSKUNameBasic || basic.Properties.IPAddress != nil {
		t.Fatalf("basic %v %+v", err, basic.Properties)
	}
	// IPv6.
	v6, err := v.putPIP("v6", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAddressVersion: ptr(armnetwork.IPVersionIPv6)}})
	if err != nil || !strings.HasPrefix(*v6.Properties.IPAddress, "2001:db8::") {
		t.Fatalf("v6 %v", err)
	}
	// Prefix, then an address from it.
	pp, err := v.net.NewPublicIPPrefixesClient().BeginCreateOrUpdate(v.ctx, testRG, "pfx", armnetwork.PublicIPPrefix{Location: ptr(testLoc),
		SKU: &armnetwork.PublicIPPrefixSKU{Name: ptr(armnetwork.PublicIPPrefixSKUNameStandard)}, Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PrefixLength: ptr[int32](30)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pfx, err := pp.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	if got := *pfx.Properties.IPPrefix; !strings.HasSuffix(got, "/30") || strings.HasPrefix(got, "203.0.113.0") {
		t.Fatalf("prefix %s", got)
	}
	fromPfx, err := v.putPIP("frompfx", armnetwork.PublicIPAddress{SKU: stdSKU(), Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPPrefix: &armnetwork.SubResource{ID: pfx.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if ip := *fromPfx.Properties.IPAddress; !strings.HasPrefix(*pfx.Properties.IPPrefix, ip[:strings.LastIndex(ip, ".")]) {
		t.Fatalf("address %s not in %s", ip, *pfx.Properties.IPPrefix)
	}
	// Deleting the prefix while an address uses it fails.
	_, err = v.net.NewPublicIPPrefixesClient().BeginDelete(v.ctx, testRG, "pfx", nil)
	if re := respErr(t, err); re.ErrorCode != "PublicIpPrefixInUse" {
		t.Fatalf("got %s", re.ErrorCode)
	}
}

func lbWithFrontend(pipID *string) armnetwork.LoadBalancer {
	return armnetwork.LoadBalancer{
		SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: ptr("fe1"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: pipID}}}},
		},
	}
}

func TestLoadBalancerBackReferencesAndValidation(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnetID := v.mustVNet("vnet")
	pip, err := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil {
		t.Fatal(err)
	}
	lbID := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/loadBalancers/kubernetes"
	// Dangling public IP reference.
	_, err = v.putLB("kubernetes", lbWithFrontend(ptr(strings.Replace(*pip.ID, "pip1", "nope", 1))))
	if re := respErr(t, err); re.StatusCode != 400 || re.ErrorCode != "InvalidResourceReference" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
	// SKU mismatch: Basic LB with Standard PIP.
	bad := lbWithFrontend(pip.ID)
	bad.SKU.Name = ptr(armnetwork.LoadBalancerSKUNameBasic)
	_, err = v.putLB("kubernetes", bad)
	if re := respErr(t, err); re.ErrorCode != "PublicIPAndLBSkuDoNotMatch" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	lb := lbWithFrontend(pip.ID)
	lb.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: ptr("kubernetes")}}
	lb.Properties.Probes = []*armnetwork.Probe{{Name: ptr("p80"), Properties: &armnetwork.ProbePropertiesFormat{Protocol: ptr(armnetwork.ProbeProtocolTCP), Port: ptr[int32](80)}}}
	lb.Properties.LoadBalancingRules = []*armnetwork.LoadBalancingRule{{Name: ptr("r80"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
		Protocol: ptr(armnetwork.TransportProtocolTCP), FrontendPort: ptr[int32](80), BackendPort: ptr[int32](80),
		FrontendIPConfiguration: &armnetwork.SubResource{ID: ptr(lbID + "/frontendIPConfigurations/fe1")},
		BackendAddressPool:      &armnetwork.SubResource{ID: ptr(lbID + "/backendAddressPools/kubernetes")},
		Probe:                   &armnetwork.SubResource{ID: ptr(lbID + "/probes/p80")},
	}}}
	got, err := v.putLB("kubernetes", lb)
	if err != nil {
		t.Fatal(err)
	}
	fe := got.Properties.FrontendIPConfigurations[0]
	if len(fe.Properties.LoadBalancingRules) != 1 || *fe.Etag != *got.Etag || *fe.Type != "Microsoft.Network/loadBalancers/frontendIPConfigurations" {
		t.Fatalf("frontend back-refs %+v", fe)
	}
	if len(got.Properties.Probes[0].Properties.LoadBalancingRules) != 1 || len(got.Properties.BackendAddressPools[0].Properties.LoadBalancingRules) != 1 {
		t.Fatal("probe/pool back-refs missing")
	}
	// The public IP now points back at the frontend and cannot be deleted.
	pipNow, err := v.net.NewPublicIPAddressesClient().Get(v.ctx, testRG, "pip1", nil)
	if err != nil || pipNow.Properties.IPConfiguration == nil || !strings.EqualFold(*pipNow.Properties.IPConfiguration.ID, *fe.ID) {
		t.Fatalf("pip back-ref %v %+v", err, pipNow.Properties.IPConfiguration)
	}
	_, err = v.net.NewPublicIPAddressesClient().BeginDelete(v.ctx, testRG, "pip1", nil)
	if re := respErr(t, err); re.ErrorCode != "PublicIPAddressInUse" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	// Duplicate frontend port.
	dup := got
	dup.Properties.LoadBalancingRules = append(dup.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: ptr("r80b"), Properties: dup.Properties.LoadBalancingRules[0].Properties})
	if _, err := v.putLB("kubernetes", dup); respErr(t, err).ErrorCode != "RulesUseSameFrontendIpConfigurationProtocolAndPort" {
		t.Fatal("duplicate rule accepted")
	}

	// A NIC joins the pool: the pool lists its ip configuration.
	nicPoller, err := v.net.NewInterfacesClient().BeginCreateOrUpdate(v.ctx, testRG, "nic1", armnetwork.Interface{Location: ptr(testLoc),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: ptr("ipc"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &subnetID},
				LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{{ID: ptr(lbID + "/backendAddressPools/kubernetes")}}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nic, err := nicPoller.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	if ip := *nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress; ip != "10.0.1.4" {
		t.Fatalf("nic ip %s", ip)
	}
	pool, err := v.net.NewLoadBalancerBackendAddressPoolsClient().Get(v.ctx, testRG, "kubernetes", "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pool.Properties.BackendIPConfigurations); n != 1 || !strings.EqualFold(*pool.Properties.BackendIPConfigurations[0].ID, *nic.Properties.IPConfigurations[0].ID) {
		t.Fatalf("backendIPConfigurations %d", n)
	}
	lbNow, _ := v.net.NewLoadBalancersClient().Get(v.ctx, testRG, "kubernetes", nil)
	if *lbNow.Etag == *got.Etag {
		t.Fatal("LB etag did not change when a NIC joined its pool")
	}
	// Subnet shows the ip configuration too.
	sn, _ := v.net.NewSubnetsClient().Get(v.ctx, testRG, "vnet", "s1", nil)
	if len(sn.Properties.IPConfigurations) != 1 {
		t.Fatalf("subnet ipConfigurations %d", len(sn.Properties.IPConfigurations))
	}
	// A NIC attached to a VM cannot be deleted.
	if err := v.engine.Do(func(tx *arm.Tx) error {
		return tx.Update(*nic.ID, func(doc map[string]any) error {
			arm.Props(doc)["virtualMachine"] = map[string]any{"id": "/subscriptions/" + testSub + "/resourceGroups/rg1/providers/Microsoft.Compute/virtualMachines/vm1"}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	_, err = v.net.NewInterfacesClient().BeginDelete(v.ctx, testRG, "nic1", nil)
	if re := respErr(t, err); re.ErrorCode != "NicInUse" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	// Static internal frontend from the subnet; duplicate static address rejected.
	ilb := armnetwork.LoadBalancer{SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
			{Name: ptr("static"), Zones: []*string{ptr("1")}, Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &subnetID},
				PrivateIPAllocationMethod: ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: ptr("10.0.1.50")}},
			{Name: ptr("dyn"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &subnetID}}},
		}}}
	in, err := v.putLB("kubernetes-internal", ilb)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := *in.Properties.FrontendIPConfigurations[0].Properties.PrivateIPAddress, *in.Properties.FrontendIPConfigurations[1].Properties.PrivateIPAddress; a != "10.0.1.50" || b != "10.0.1.5" {
		t.Fatalf("internal frontends %s %s", a, b)
	}
	ilb2 := ilb
	_, err = v.putLB("other-internal", ilb2)
	if re := respErr(t, err); re.ErrorCode != "PrivateIPAddressInUse" {
		t.Fatalf("got %s", re.ErrorCode)
	}
}

func TestBackendPoolSubresourceAndAdminState(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	v.mustVNet("vnet")
	pip, _ := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	lb, err := v.putLB("kubernetes", lbWithFrontend(pip.ID))
	if err != nil {
		t.Fatal(err)
	}
	vnetID := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/virtualNetworks/vnet"
	pools := v.net.NewLoadBalancerBackendAddressPoolsClient()
	pp, err := pools.BeginCreateOrUpdate(v.ctx, testRG, "kubernetes", "kubernetes", armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		VirtualNetwork: &armnetwork.SubResource{ID: &vnetID},
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
			{Name: ptr("node-0"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: ptr("10.0.1.10"), AdminState: ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)}},
			{Name: ptr("node-1"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: ptr("10.0.1.11")}},
		}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pp.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	if *pool.Type != "Microsoft.Network/loadBalancers/backendAddressPools" || len(pool.Properties.LoadBalancerBackendAddresses) != 2 {
		t.Fatalf("pool %+v", pool)
	}
	lbNow, err := v.net.NewLoadBalancersClient().Get(v.ctx, testRG, "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbNow.Properties.BackendAddressPools) != 1 || *lbNow.Etag == *lb.Etag || *pool.Etag != *lbNow.Etag {
		t.Fatal("pool PUT not visible inline or etag not renewed")
	}
	if s := *lbNow.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[0].Properties.AdminState; s != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Fatalf("adminState %s", s)
	}
	// Invalid admin state.
	resp := v.raw("PUT", *pool.ID+"?api-version=2025-05-01", `{"properties":{"virtualNetwork":{"id":"`+vnetID+`"},"loadBalancerBackendAddresses":[{"name":"x","properties":{"ipAddress":"10.0.1.12","adminState":"Drain"}}]}}`, nil)
	if resp.StatusCode != 400 {
		t.Fatalf("Drain accepted: %d", resp.StatusCode)
	}
	// Stale etag on the pool → 412 with NRP's body.
	resp = v.raw("PUT", *pool.ID+"?api-version=2025-05-01", `{"properties":{}}`, map[string]string{"If-Match": *lb.Etag})
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale etag: %d", resp.StatusCode)
	}
	// List pools (child collection) and delete one.
	pager := pools.NewListPager(testRG, "kubernetes", nil)
	n := 0
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != 1 {
		t.Fatalf("pools listed %d", n)
	}
	dp, err := pools.BeginDelete(v.ctx, testRG, "kubernetes", "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Get(v.ctx, testRG, "kubernetes", "kubernetes", nil); respErr(t, err).ErrorCode != "NotFound" {
		t.Fatal("pool still there")
	}
}
