package network

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

func (v *env) getLB(name string) armnetwork.LoadBalancer {
	v.t.Helper()
	lb, err := v.net.NewLoadBalancersClient().Get(v.ctx, testRG, name, nil)
	if err != nil {
		v.t.Fatal(err)
	}
	return lb.LoadBalancer
}

func (v *env) putPool(lb, name string, pool armnetwork.BackendAddressPool) (armnetwork.BackendAddressPool, error) {
	v.t.Helper()
	p, err := v.net.NewLoadBalancerBackendAddressPoolsClient().BeginCreateOrUpdate(v.ctx, testRG, lb, name, pool, nil)
	if err != nil {
		return armnetwork.BackendAddressPool{}, err
	}
	res, err := p.PollUntilDone(v.ctx, fastPoll)
	return res.BackendAddressPool, err
}

func nicWithPools(subnet string, pools ...string) []*armnetwork.InterfaceIPConfiguration {
	c := ipc("ipconfig1", subnet, "", "")
	for _, p := range pools {
		c.Properties.LoadBalancerBackendAddressPools = append(c.Properties.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: ptr(p)})
	}
	return []*armnetwork.InterfaceIPConfiguration{c}
}

func members(pool *armnetwork.BackendAddressPool) []string {
	var out []string
	for _, r := range pool.Properties.BackendIPConfigurations {
		out = append(out, strings.ToLower(*r.ID))
	}
	return out
}

func nicEntry(name, ipConfig string, st armnetwork.LoadBalancerBackendAddressAdminState) *armnetwork.LoadBalancerBackendAddress {
	return &armnetwork.LoadBalancerBackendAddress{Name: ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
		NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: ptr(ipConfig)}, AdminState: ptr(st)}}
}

// NIC PUTs own NIC-based pool membership; the pool only carries admin state
// for existing members (arm-protocol.md 3.2), and membership changes move the
// load balancer's etag.
func TestNICBasedPoolMembershipAndAdminState(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnet := v.mustVNet("vnet")
	pip, err := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil {
		t.Fatal(err)
	}
	lbBody := lbWithFrontend(pip.ID)
	lbBody.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: ptr("kubernetes")}}
	lb, err := v.putLB("kubernetes", lbBody)
	if err != nil {
		t.Fatal(err)
	}
	poolID := *lb.Properties.BackendAddressPools[0].ID

	// (a) A NIC PUT adding the pool shows in backendIPConfigurations and renews the LB etag.
	nic1, err := v.putNIC("nic1", nicWithPools(subnet, poolID)...)
	if err != nil {
		t.Fatal(err)
	}
	ipc1 := *nic1.Properties.IPConfigurations[0].ID
	after := v.getLB("kubernetes")
	if got := members(after.Properties.BackendAddressPools[0]); len(got) != 1 || got[0] != strings.ToLower(ipc1) {
		t.Fatalf("pool members %v, want [%s]", got, ipc1)
	}
	if *after.Etag == *lb.Etag {
		t.Error("LB etag not renewed by a membership change")
	}
	nic2, err := v.putNIC("nic2", nicWithPools(subnet)...)
	if err != nil {
		t.Fatal(err)
	}
	ipc2 := *nic2.Properties.IPConfigurations[0].ID

	// (c) NIC-based pool: admin state on an existing member is accepted through the child API.
	pool, err := v.putPool("kubernetes", "kubernetes", armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{nicEntry("nic1-ipconfig1", ipc1, armnetwork.LoadBalancerBackendAddressAdminStateDown)}}})
	if err != nil {
		t.Fatalf("admin state on a NIC member: %v", err)
	}
	if len(pool.Properties.LoadBalancerBackendAddresses) != 1 || *pool.Properties.LoadBalancerBackendAddresses[0].Properties.AdminState != armnetwork.LoadBalancerBackendAddressAdminStateDown ||
		len(members(&pool)) != 1 {
		t.Fatalf("pool after admin state PUT: %+v", pool.Properties)
	}
	// … but not for an ip configuration that is not a member (membership changes on the NIC),
	_, err = v.putPool("kubernetes", "kubernetes", armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{nicEntry("nic2", ipc2, armnetwork.LoadBalancerBackendAddressAdminStateDown)}}})
	if re := respErr(t, err); re.StatusCode != 400 || re.ErrorCode != "NicBasedBackendAddressPoolMemberMustBeAddedOnNetworkInterface" {
		t.Fatalf("non-member entry: %d %s", re.StatusCode, re.ErrorCode)
	}
	// … nor while creating a pool,
	_, err = v.putPool("kubernetes", "newpool", armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{nicEntry("nic1", ipc1, armnetwork.LoadBalancerBackendAddressAdminStateDown)}}})
	if re := respErr(t, err); re.StatusCode != 400 || re.ErrorCode != "AdminStateNotSupportedOnNicBasedBackendPoolCreation" {
		t.Fatalf("admin state at pool creation: %d %s", re.StatusCode, re.ErrorCode)
	}
	// … nor mixed with IP addresses.
	_, err = v.putPool("kubernetes", "kubernetes", armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: ptr("ip"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
			IPAddress: ptr("10.0.1.50"), VirtualNetwork: &armnetwork.SubResource{ID: ptr(strings.Split(subnet, "/subnets/")[0])}}}}}})
	if re := respErr(t, err); re.ErrorCode != "LoadBalancerBackendAddressPoolCannotMixNicAndIpBasedMembers" {
		t.Fatalf("IP entry in a NIC pool: %s", re.ErrorCode)
	}
	// A full LB PUT of what was read keeps membership and admin state.
	cur := v.getLB("kubernetes")
	if _, err := v.putLB("kubernetes", cur); err != nil {
		t.Fatalf("LB round trip: %v", err)
	}
	cur = v.getLB("kubernetes")
	if p := cur.Properties.BackendAddressPools[0]; len(members(p)) != 1 || len(p.Properties.LoadBalancerBackendAddresses) != 1 {
		t.Fatalf("LB round trip lost pool state: %+v", p.Properties)
	}
	// The NIC leaving the pool drops its member and its admin-state entry.
	if _, err := v.putNIC("nic1", nicWithPools(subnet)...); err != nil {
		t.Fatal(err)
	}
	cur = v.getLB("kubernetes")
	if p := cur.Properties.BackendAddressPools[0]; len(members(p)) != 0 || len(p.Properties.LoadBalancerBackendAddresses) != 0 {
		t.Fatalf("after the NIC left: %+v", p.Properties)
	}
}

// (c) IP-based pools take None/Up/Down per address.
func TestIPBasedPoolAdminStates(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnet := v.mustVNet("vnet")
	vnetID := strings.Split(subnet, "/subnets/")[0]
	pip, _ := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if _, err := v.putLB("kubernetes", lbWithFrontend(pip.ID)); err != nil {
		t.Fatal(err)
	}
	entry := func(ip string, st armnetwork.LoadBalancerBackendAddressAdminState) *armnetwork.LoadBalancerBackendAddress {
		return &armnetwork.LoadBalancerBackendAddress{Name: ptr("n-" + ip), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: ptr(ip), AdminState: ptr(st)}}
	}
	_, err := v.putPool("kubernetes", "kubernetes", armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		VirtualNetwork: &armnetwork.SubResource{ID: &vnetID},
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{entry("10.0.1.4", armnetwork.LoadBalancerBackendAddressAdminStateNone),
			entry("10.0.1.5", armnetwork.LoadBalancerBackendAddressAdminStateUp), entry("10.0.1.6", armnetwork.LoadBalancerBackendAddressAdminStateDown)}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]armnetwork.LoadBalancerBackendAddressAdminState{}
	for _, a := range v.getLB("kubernetes").Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses {
		got[*a.Properties.IPAddress] = *a.Properties.AdminState
	}
	if got["10.0.1.4"] != "None" || got["10.0.1.5"] != "Up" || got["10.0.1.6"] != "Down" {
		t.Fatalf("admin states %v", got)
	}
}

// (d) The backendAddressPools child API shares the parent LB's etag: a pool's
// etag is the LB's, If-Match / If-None-Match are checked against it, and every
// pool write or delete renews it.
func TestBackendPoolChildETags(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnet := v.mustVNet("vnet")
	vnetID := strings.Split(subnet, "/subnets/")[0]
	pip, _ := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	lbBody := lbWithFrontend(pip.ID)
	lbBody.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: ptr("a")}, {Name: ptr("b")}}
	lb, err := v.putLB("kubernetes", lbBody)
	if err != nil {
		t.Fatal(err)
	}
	poolURL := *lb.ID + "/backendAddressPools/a?api-version=2025-05-01"
	body := `{"properties":{"virtualNetwork":{"id":"` + vnetID + `"},"loadBalancerBackendAddresses":[{"name":"x","properties":{"ipAddress":"10.0.1.9"}}]}}`
	etagOf := func(resp *http.Response) (header, inBody string) {
		b, _ := io.ReadAll(resp.Body)
		var d struct {
			Etag string `json:"etag"`
		}
		_ = json.Unmarshal(b, &d)
		return resp.Header.Get("ETag"), d.Etag
	}

	resp := v.raw("GET", poolURL, "", nil)
	h, b := etagOf(resp)
	if resp.StatusCode != 200 || h != *lb.Etag || b != *lb.Etag {
		t.Fatalf("pool GET etag header %q body %q, LB %q", h, b, *lb.Etag)
	}
	steps := []struct {
		name, method, body string
		hdr                map[string]string
		status             int
	}{
		{"If-None-Match * on an existing pool", "PUT", body, map[string]string{"If-None-Match": "*"}, 412},
		{"stale If-Match", "PUT", body, map[string]string{"If-Match": `W/"00000000-0000-0000-0000-000000000000"`}, 412},
		{"current If-Match (the LB's etag)", "PUT", body, map[string]string{"If-Match": *lb.Etag}, 0},
		{"the same etag again is stale", "PUT", body, map[string]string{"If-Match": *lb.Etag}, 412},
		{"DELETE with a stale If-Match", "DELETE", "", map[string]string{"If-Match": *lb.Etag}, 412},
	}
	for _, s := range steps {
		resp := v.raw(s.method, poolURL, s.body, s.hdr)
		if s.status == 0 && (resp.StatusCode < 200 || resp.StatusCode > 202) || s.status != 0 && resp.StatusCode != s.status {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d %s", s.name, resp.StatusCode, b)
		}
	}
	now := v.getLB("kubernetes")
	if *now.Etag == *lb.Etag {
		t.Fatal("pool PUT did not renew the LB etag")
	}
	for _, p := range now.Properties.BackendAddressPools {
		if *p.Etag != *now.Etag {
			t.Errorf("pool %s etag %s, LB %s", *p.Name, *p.Etag, *now.Etag)
		}
	}
	// A full LB PUT with the etag read before the pool write is refused (what the CCM relies on).
	resp = v.raw("PUT", *lb.ID+"?api-version=2025-05-01", `{"location":"eastus","sku":{"name":"Standard"},"properties":{}}`, map[string]string{"If-Match": *lb.Etag})
	if resp.StatusCode != 412 {
		t.Fatalf("LB PUT with the pre-pool-write etag: %d", resp.StatusCode)
	}
	// DELETE with the current etag works and renews the LB etag again; pool b is untouched.
	resp = v.raw("DELETE", poolURL, "", map[string]string{"If-Match": *now.Etag})
	if resp.StatusCode < 200 || resp.StatusCode > 204 {
		t.Fatalf("pool DELETE: %d", resp.StatusCode)
	}
	final := v.getLB("kubernetes")
	if *final.Etag == *now.Etag || len(final.Properties.BackendAddressPools) != 1 || *final.Properties.BackendAddressPools[0].Name != "b" {
		t.Fatalf("after pool DELETE: etag %s (was %s), pools %d", *final.Etag, *now.Etag, len(final.Properties.BackendAddressPools))
	}
	resp = v.raw("GET", poolURL, "", nil)
	if resp.StatusCode != 404 {
		t.Fatalf("deleted pool GET: %d", resp.StatusCode)
	}
}

// addresses maps a pool's address entries by the ip configuration they name ("" for IP entries)
// to their names; it fails on an entry that names an ip configuration and carries an address.
func addresses(t *testing.T, pool *armnetwork.BackendAddressPool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		ref := ""
		if a.Properties != nil && a.Properties.NetworkInterfaceIPConfiguration != nil {
			ref = strings.ToLower(*a.Properties.NetworkInterfaceIPConfiguration.ID)
			if a.Properties.IPAddress != nil {
				t.Fatalf("entry %s names %s and has address %s", *a.Name, ref, *a.Properties.IPAddress)
			}
		}
		out[ref] = *a.Name
	}
	return out
}

// NRP lists the members of a NIC-based pool in loadBalancerBackendAddresses as well, each naming
// its ip configuration (networkInterfaceIPConfiguration, read-only in loadBalancer.json's
// LoadBalancerBackendAddressPropertiesFormat): <resource group>_<NIC><ip configuration> for a
// NIC, a GUID for a scale set instance. Clients send the entries back (the SDK round-trips
// them); NRP ignores an entry that only names an ip configuration, so a round trip neither
// makes members nor turns the pool IP-based.
func TestNICPoolListsMembersAsAddresses(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnet := v.mustVNet("vnet")
	pip, err := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil {
		t.Fatal(err)
	}
	lbBody := lbWithFrontend(pip.ID)
	lbBody.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: ptr("kubernetes")}}
	lb, err := v.putLB("kubernetes", lbBody)
	if err != nil {
		t.Fatal(err)
	}
	poolID := *lb.Properties.BackendAddressPools[0].ID
	nic1, err := v.putNIC("nic1", nicWithPools(subnet, poolID)...)
	if err != nil {
		t.Fatal(err)
	}
	ipc1 := strings.ToLower(*nic1.Properties.IPConfigurations[0].ID)
	// A scale set instance's ip configuration, as compute reports it.
	vmIPC := "/subscriptions/" + testSub + "/resourceGroups/rg1/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/nic/ipConfigurations/ipc"
	var vmMembers []IPConfiguration
	AddIPConfigSource(v.engine, func(tx *arm.Tx) []IPConfiguration { return vmMembers })
	if err := v.engine.Do(func(tx *arm.Tx) error {
		ip, err := AllocatePrivateIP(tx, subnet, vmIPC, "")
		vmMembers = []IPConfiguration{{ID: vmIPC, SubnetID: subnet, PrivateIP: ip, PoolIDs: []string{poolID}}}
		tx.MarkChanged(poolID)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{ipc1: "rg1_nic1ipconfig1", strings.ToLower(vmIPC): guidOf(vmIPC)}
	check := func(step string, pool *armnetwork.BackendAddressPool, want map[string]string) {
		t.Helper()
		got := addresses(t, pool)
		if len(got) != len(want) || len(members(pool)) != len(want) {
			t.Fatalf("%s: entries %v members %v, want %v", step, got, members(pool), want)
		}
		for ref, name := range want {
			if got[ref] != name {
				t.Fatalf("%s: entry of %s is %q, want %q (all: %v)", step, ref, got[ref], name, got)
			}
		}
	}
	check("LB GET", v.getLB("kubernetes").Properties.BackendAddressPools[0], want)
	pool, err := v.net.NewLoadBalancerBackendAddressPoolsClient().Get(v.ctx, testRG, "kubernetes", "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	check("pool GET", &pool.BackendAddressPool, want)
	// The wire shape of an entry: id and type besides name and properties.
	for _, a := range arm.Arr(arm.Props(findChild(v.rawJSON(*lb.ID), "backendAddressPools", "kubernetes")), "loadBalancerBackendAddresses") {
		if arm.Str(a, "id") != poolID+"/loadBalancerBackendAddresses/"+arm.Str(a, "name") || arm.Str(a, "type") != "Microsoft.Network/loadBalancers/backendAddressPools/loadBalancerBackendAddresses" {
			t.Fatalf("entry shape %v", a)
		}
	}

	// Round trips of what was read: the LB, then the pool through its own API.
	cur := v.getLB("kubernetes")
	if _, err := v.putLB("kubernetes", cur); err != nil {
		t.Fatalf("LB round trip: %v", err)
	}
	check("after the LB round trip", v.getLB("kubernetes").Properties.BackendAddressPools[0], want)
	if _, err := v.putPool("kubernetes", "kubernetes", pool.BackendAddressPool); err != nil {
		t.Fatalf("pool round trip: %v", err)
	}
	check("after the pool round trip", v.getLB("kubernetes").Properties.BackendAddressPools[0], want)
	// A PUT that leaves the entries out gets them back in its own answer: they are NRP's listing.
	doc := v.rawJSON(*lb.ID)
	delete(arm.Props(findChild(doc, "backendAddressPools", "kubernetes")), "loadBalancerBackendAddresses")
	body, _ := json.Marshal(doc)
	resp := v.raw(http.MethodPut, *lb.ID+"?api-version=2025-05-01", string(body), nil)
	var answer armnetwork.LoadBalancer
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("raw LB PUT: %d %v", resp.StatusCode, err)
	}
	check("the PUT's answer", answer.Properties.BackendAddressPools[0], want)
	// The pool is still NIC-based: another NIC can join it.
	nic2, err := v.putNIC("nic2", nicWithPools(subnet, poolID)...)
	if err != nil {
		t.Fatalf("a NIC joining after the round trips: %v", err)
	}
	want[strings.ToLower(*nic2.Properties.IPConfigurations[0].ID)] = "rg1_nic2ipconfig1"
	check("after nic2 joined", v.getLB("kubernetes").Properties.BackendAddressPools[0], want)

	// A stale entry (its NIC left the pool since it was read) is ignored, not refused.
	stale := v.getLB("kubernetes")
	if _, err := v.putNIC("nic2", nicWithPools(subnet)...); err != nil {
		t.Fatal(err)
	}
	delete(want, strings.ToLower(*nic2.Properties.IPConfigurations[0].ID))
	stale.Etag = nil
	if _, err := v.putLB("kubernetes", stale); err != nil {
		t.Fatalf("LB PUT with a stale NIC entry: %v", err)
	}
	check("after the stale PUT", v.getLB("kubernetes").Properties.BackendAddressPools[0], want)
}
