package network

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func (v *env) mustServiceGateway(vnetID, subnetID string) {
	v.t.Helper()
	p, err := v.net.NewServiceGatewaysClient().BeginCreateOrUpdate(v.ctx, testRG, "servicegateway", armnetwork.ServiceGateway{Location: ptr(testLoc),
		SKU: &armnetwork.ServiceGatewaySKU{Name: ptr(armnetwork.ServiceGatewaySKUNameStandard), Tier: ptr(armnetwork.ServiceGatewaySKUTierRegional)},
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: &vnetID},
			RouteTargetAddress: &armnetwork.RouteTargetAddressPropertiesFormat{Subnet: &armnetwork.Subnet{ID: &subnetID},
				PrivateIPAllocationMethod: ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: ptr("10.0.1.4")}}}, nil)
	if err != nil {
		v.t.Fatal(err)
	}
	if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
		v.t.Fatal(err)
	}
}

func locs(action armnetwork.UpdateAction, entries ...*armnetwork.ServiceGatewayAddressLocation) armnetwork.ServiceGatewayUpdateAddressLocationsRequest {
	return armnetwork.ServiceGatewayUpdateAddressLocationsRequest{Action: ptr(action), AddressLocations: entries}
}

func loc(node string, action armnetwork.AddressUpdateAction, addrs ...string) *armnetwork.ServiceGatewayAddressLocation {
	l := &armnetwork.ServiceGatewayAddressLocation{AddressLocation: ptr(node), AddressUpdateAction: ptr(action), Addresses: []*armnetwork.ServiceGatewayAddress{}}
	for i := 0; i+1 < len(addrs); i += 2 {
		a := &armnetwork.ServiceGatewayAddress{Address: ptr(addrs[i]), Services: []*string{}}
		if addrs[i+1] != "" {
			a.Services = append(a.Services, ptr(addrs[i+1]))
		}
		l.Addresses = append(l.Addresses, a)
	}
	return l
}

func TestServiceGatewayUpdates(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnetID := v.mustVNet("vnet")
	vnetID := strings.TrimSuffix(subnetID, "/subnets/s1")
	v.mustServiceGateway(vnetID, subnetID)
	sg := v.net.NewServiceGatewaysClient()
	current := func() map[string][]string {
		out := map[string][]string{}
		pager := sg.NewGetAddressLocationsPager(testRG, "servicegateway", nil)
		for pager.More() {
			page, err := pager.NextPage(v.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range page.Value {
				for _, a := range l.Addresses {
					out[*l.AddressLocation] = append(out[*l.AddressLocation], *a.Address+"="+strings.Join(derefAll(a.Services), ","))
				}
				if len(l.Addresses) == 0 {
					out[*l.AddressLocation] = nil
				}
			}
		}
		return out
	}
	// NRP answers 200, which the generated client reports as a ResponseError
	// with StatusCode 200 and no error code (the CCM treats that as success).
	syncOK := func(err error) {
		t.Helper()
		re := respErr(t, err)
		if re.StatusCode != http.StatusOK || re.ErrorCode != "" {
			t.Fatalf("got %d %q", re.StatusCode, re.ErrorCode)
		}
	}
	_, err := sg.BeginUpdateAddressLocations(v.ctx, testRG, "servicegateway", locs(armnetwork.UpdateActionFullUpdate,
		loc("10.0.1.10", armnetwork.AddressUpdateActionFullUpdate, "10.244.0.5", "svc-a", "10.244.0.6", "svc-b"),
		loc("10.0.1.11", armnetwork.AddressUpdateActionFullUpdate, "10.244.1.5", "svc-a")), nil)
	syncOK(err)
	if got := current(); len(got) != 2 || len(got["10.0.1.10"]) != 2 {
		t.Fatalf("after full update %v", got)
	}
	// Partial: drop one address of the first node (no services), delete the second node (no addresses).
	_, err = sg.BeginUpdateAddressLocations(v.ctx, testRG, "servicegateway", locs(armnetwork.UpdateActionPartialUpdate,
		loc("10.0.1.10", armnetwork.AddressUpdateActionPartialUpdate, "10.244.0.6", ""),
		&armnetwork.ServiceGatewayAddressLocation{AddressLocation: ptr("10.0.1.11")}), nil)
	syncOK(err)
	if got := current(); len(got) != 1 || len(got["10.0.1.10"]) != 1 || got["10.0.1.10"][0] != "10.244.0.5=svc-a" {
		t.Fatalf("after partial update %v", got)
	}
	// Duplicate locations are rejected.
	_, err = sg.BeginUpdateAddressLocations(v.ctx, testRG, "servicegateway", locs(armnetwork.UpdateActionPartialUpdate,
		loc("10.0.1.12", armnetwork.AddressUpdateActionFullUpdate, "10.244.2.5", "x"), loc("10.0.1.12", armnetwork.AddressUpdateActionFullUpdate)), nil)
	if re := respErr(t, err); re.StatusCode != 400 || re.ErrorCode != "DuplicateLocationsInRequest" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
	// Services: add two, delete one; a dangling pool reference is rejected.
	svc := func(name string, del bool) *armnetwork.ServiceGatewayServiceRequest {
		return &armnetwork.ServiceGatewayServiceRequest{IsDelete: ptr(del), Service: &armnetwork.ServiceGatewayService{Name: ptr(name),
			Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: ptr(armnetwork.ServiceTypeInbound), IsDefault: ptr(false)}}}
	}
	_, err = sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", armnetwork.ServiceGatewayUpdateServicesRequest{Action: ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: []*armnetwork.ServiceGatewayServiceRequest{svc("a", false), svc("b", false)}}, nil)
	syncOK(err)
	_, err = sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", armnetwork.ServiceGatewayUpdateServicesRequest{Action: ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: []*armnetwork.ServiceGatewayServiceRequest{svc("a", true)}}, nil)
	syncOK(err)
	bad := svc("c", false)
	bad.Service.Properties.LoadBalancerBackendPools = []*armnetwork.BackendAddressPool{{ID: ptr(vnetID + "/../../loadBalancers/nope/backendAddressPools/x")}}
	_, err = sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", armnetwork.ServiceGatewayUpdateServicesRequest{Action: ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: []*armnetwork.ServiceGatewayServiceRequest{bad}}, nil)
	if re := respErr(t, err); re.ErrorCode != "InvalidResourceReference" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	var names []string
	pager := sg.NewGetServicesPager(testRG, "servicegateway", nil)
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Value {
			names = append(names, *s.Name)
		}
	}
	if strings.Join(names, ",") != "b" {
		t.Fatalf("services %v", names)
	}
	// Private state never leaks into the resource body.
	b, _ := v.engine.GetResource(vnetID[:strings.Index(vnetID, "/providers/")] + "/providers/Microsoft.Network/serviceGateways/servicegateway")
	if strings.Contains(string(b), arm.PrivatePrefix) {
		t.Fatalf("private keys leaked: %s", b)
	}
}

func TestServiceGatewaySwaggerMode(t *testing.T) {
	v := newEnv(t, arm.Config{ServiceGatewayActionStatus: http.StatusAccepted})
	v.mustRG(testRG)
	subnetID := v.mustVNet("vnet")
	v.mustServiceGateway(strings.TrimSuffix(subnetID, "/subnets/s1"), subnetID)
	p, err := v.net.NewServiceGatewaysClient().BeginUpdateAddressLocations(v.ctx, testRG, "servicegateway",
		locs(armnetwork.UpdateActionFullUpdate, loc("10.0.1.10", armnetwork.AddressUpdateActionFullUpdate, "10.244.0.5", "svc")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
}

func TestNatGatewayAndSnapshot(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnetID := v.mustVNet("vnet")
	pip, err := v.putPIP("natpip", armnetwork.PublicIPAddress{SKU: &armnetwork.PublicIPAddressSKU{Name: ptr(armnetwork.PublicIPAddressSKUNameStandardV2)}})
	if err != nil {
		t.Fatal(err)
	}
	np, err := v.net.NewNatGatewaysClient().BeginCreateOrUpdate(v.ctx, testRG, "nat", armnetwork.NatGateway{Location: ptr(testLoc),
		SKU:        &armnetwork.NatGatewaySKU{Name: ptr(armnetwork.NatGatewaySKUNameStandardV2)},
		Properties: &armnetwork.NatGatewayPropertiesFormat{PublicIPAddresses: []*armnetwork.SubResource{{ID: pip.ID}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nat, err := np.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	// Attach the NAT gateway to the subnet; the gateway lists the subnet.
	sn, _ := v.net.NewSubnetsClient().Get(v.ctx, testRG, "vnet", "s1", nil)
	sn.Properties.NatGateway = &armnetwork.SubResource{ID: nat.ID}
	sp, err := v.net.NewSubnetsClient().BeginCreateOrUpdate(v.ctx, testRG, "vnet", "s1", sn.Subnet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	got, _ := v.net.NewNatGatewaysClient().Get(v.ctx, testRG, "nat", nil)
	if len(got.Properties.Subnets) != 1 || !strings.EqualFold(*got.Properties.Subnets[0].ID, subnetID) {
		t.Fatalf("nat subnets %v", got.Properties.Subnets)
	}
	if _, err := v.net.NewNatGatewaysClient().BeginDelete(v.ctx, testRG, "nat", nil); respErr(t, err).ErrorCode != "InUseNatGatewayCannotBeDeleted" {
		t.Fatal("in-use NAT gateway deleted")
	}
	if _, err := v.net.NewPublicIPAddressesClient().BeginDelete(v.ctx, testRG, "natpip", nil); respErr(t, err).ErrorCode != "PublicIPAddressInUse" {
		t.Fatal("NAT public IP deleted")
	}
	// Snapshot, reset, restore: state and allocations come back.
	snap, err := v.engine.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	v.engine.Reset()
	if _, err := v.net.NewNatGatewaysClient().Get(v.ctx, testRG, "nat", nil); respErr(t, err).StatusCode != 404 {
		t.Fatal("reset kept state")
	}
	if err := v.engine.Restore(snap); err != nil {
		t.Fatal(err)
	}
	again, err := v.net.NewNatGatewaysClient().Get(v.ctx, testRG, "nat", nil)
	if err != nil || *again.Etag != *got.Etag {
		t.Fatalf("restore: %v", err)
	}
	next, err := v.putPIP("after", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil || *next.Properties.IPAddress == *pip.Properties.IPAddress {
		t.Fatalf("allocation after restore reused %v", next.Properties.IPAddress)
	}
}

func TestExternalIPConfigSource(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnetID := v.mustVNet("vnet")
	pip, _ := v.putPIP("pip", armnetwork.PublicIPAddress{SKU: stdSKU()})
	lb := lbWithFrontend(pip.ID)
	lb.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: ptr("kubernetes")}}
	got, err := v.putLB("kubernetes", lb)
	if err != nil {
		t.Fatal(err)
	}
	poolID := *got.Properties.BackendAddressPools[0].ID
	vmIPC := "/subscriptions/" + testSub + "/resourceGroups/rg1/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/nic/ipConfigurations/ipc"
	var members []IPConfiguration
	AddIPConfigSource(v.engine, func(tx *arm.Tx) []IPConfiguration { return members })
	// What compute does when a VMSS VM joins: allocate an address, change its document, let the deriver run.
	if err := v.engine.Do(func(tx *arm.Tx) error {
		ip, err := AllocatePrivateIP(tx, subnetID, vmIPC, "")
		if err != nil {
			return err
		}
		members = []IPConfiguration{{ID: vmIPC, SubnetID: subnetID, PrivateIP: ip, PoolIDs: []string{poolID}}}
		tx.MarkChanged(poolID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pool, err := v.net.NewLoadBalancerBackendAddressPoolsClient().Get(v.ctx, testRG, "kubernetes", "kubernetes", nil)
	if err != nil || len(pool.Properties.BackendIPConfigurations) != 1 || *pool.Properties.BackendIPConfigurations[0].ID != vmIPC {
		t.Fatalf("pool members %v %+v", err, pool.Properties.BackendIPConfigurations)
	}
	// A subnet in use cannot be removed.
	_, err = v.net.NewSubnetsClient().BeginDelete(v.ctx, testRG, "vnet", "s1", nil)
	if re := respErr(t, err); re.ErrorCode != "InUseSubnetCannotBeDeleted" {
		t.Fatalf("got %s", re.ErrorCode)
	}
}

// TestServiceGatewayServiceRules: a service that addresses still map to cannot be deleted (by
// isDelete or by a full update leaving it out); a full update replaces the whole list.
func TestServiceGatewayServiceRules(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnetID := v.mustVNet("vnet")
	v.mustServiceGateway(strings.TrimSuffix(subnetID, "/subnets/s1"), subnetID)
	sg := v.net.NewServiceGatewaysClient()
	ok := func(err error) {
		t.Helper()
		if re := respErr(t, err); re.StatusCode != http.StatusOK || re.ErrorCode != "" {
			t.Fatalf("got %d %q", re.StatusCode, re.ErrorCode)
		}
	}
	refused := func(err error) {
		t.Helper()
		if re := respErr(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != "ServiceWithOverlayMappingsCannotBeDeleted" {
			t.Fatalf("got %d %q", re.StatusCode, re.ErrorCode)
		}
	}
	req := func(action armnetwork.ServiceUpdateAction, del bool, names ...string) armnetwork.ServiceGatewayUpdateServicesRequest {
		r := armnetwork.ServiceGatewayUpdateServicesRequest{Action: ptr(action)}
		for _, n := range names {
			r.ServiceRequests = append(r.ServiceRequests, &armnetwork.ServiceGatewayServiceRequest{IsDelete: ptr(del),
				Service: &armnetwork.ServiceGatewayService{Name: ptr(n), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: ptr(armnetwork.ServiceTypeOutbound)}}})
		}
		return r
	}
	names := func() string {
		var out []string
		pager := sg.NewGetServicesPager(testRG, "servicegateway", nil)
		for pager.More() {
			page, err := pager.NextPage(v.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Value {
				out = append(out, *s.Name)
			}
		}
		return strings.Join(out, ",")
	}
	_, err := sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", req(armnetwork.ServiceUpdateActionPartialUpdate, false, "x", "y"), nil)
	ok(err)
	_, err = sg.BeginUpdateAddressLocations(v.ctx, testRG, "servicegateway", locs(armnetwork.UpdateActionPartialUpdate,
		loc("10.0.1.10", armnetwork.AddressUpdateActionFullUpdate, "10.244.0.5", "x")), nil)
	ok(err)
	_, err = sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", req(armnetwork.ServiceUpdateActionPartialUpdate, true, "x"), nil)
	refused(err)
	_, err = sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", req(armnetwork.ServiceUpdateActionFullUpdate, false, "y"), nil)
	refused(err)
	if got := names(); got != "x,y" {
		t.Fatalf("a refused request changed the services: %s", got)
	}
	// Withdraw the address, then a full update keeps only what it lists.
	_, err = sg.BeginUpdateAddressLocations(v.ctx, testRG, "servicegateway", locs(armnetwork.UpdateActionPartialUpdate,
		&armnetwork.ServiceGatewayAddressLocation{AddressLocation: ptr("10.0.1.10")}), nil)
	ok(err)
	_, err = sg.BeginUpdateServices(v.ctx, testRG, "servicegateway", req(armnetwork.ServiceUpdateActionFullUpdate, false, "y", "z"), nil)
	ok(err)
	if got := names(); got != "y,z" {
		t.Fatalf("after full update: %s", got)
	}
}
