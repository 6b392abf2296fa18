package network

import (
	"encoding/json"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// migrateToIpBased turns a NIC-based pool into an IP-based one in one step; afterwards no ip
// configuration may start referencing it, and a scale set instance's stale reference makes no
// member.
func TestMigrateToIPBased(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	subnet := v.mustVNet("vnet")
	pip, err := v.putPIP("pip1", armnetwork.PublicIPAddress{SKU: stdSKU()})
	if err != nil {
		t.Fatal(err)
	}
	lbBody := lbWithFrontend(pip.ID)
	lbBody.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: ptr("kubernetes")}, {Name: ptr("other")}}
	lb, err := v.putLB("kubernetes", lbBody)
	if err != nil {
		t.Fatal(err)
	}
	poolID, otherID := *lb.Properties.BackendAddressPools[0].ID, *lb.Properties.BackendAddressPools[1].ID
	var ips []string
	for _, n := range []string{"nic1", "nic2"} {
		nic, err := v.putNIC(n, nicWithPools(subnet, poolID, otherID)...)
		if err != nil {
			t.Fatal(err)
		}
		ips = append(ips, *nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress)
	}
	// A scale set instance (an external source) referencing the pool.
	instance := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/networkInterfaces/n/ipConfigurations/ipc"
	AddIPConfigSource(v.engine, func(tx *arm.Tx) []IPConfiguration {
		return []IPConfiguration{{ID: instance, SubnetID: subnet, PrivateIP: "10.0.1.200", PoolIDs: []string{poolID}}}
	})
	// Any write re-derives the members.
	if _, err := v.putPIP("pip2", armnetwork.PublicIPAddress{SKU: stdSKU()}); err != nil {
		t.Fatal(err)
	}
	if got := members(v.getLB("kubernetes").Properties.BackendAddressPools[0]); len(got) != 3 {
		t.Fatalf("members before %v", got)
	}

	path := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.Network/loadBalancers/kubernetes/migrateToIpBased?api-version=2025-05-01"
	resp := v.raw("POST", path, `{"pools":["kubernetes"]}`, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("migrate: %d %s", resp.StatusCode, body)
	}
	var out armnetwork.MigratedPools
	if err := json.Unmarshal(body, &out); err != nil || len(out.MigratedPools) != 1 || *out.MigratedPools[0] != "kubernetes" {
		t.Fatalf("answer %s", body)
	}
	after := v.getLB("kubernetes")
	pool := after.Properties.BackendAddressPools[0]
	if len(members(pool)) != 0 {
		t.Fatalf("members after %v", members(pool))
	}
	var got []string
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		got = append(got, *a.Properties.IPAddress)
		if a.Properties.VirtualNetwork == nil || !strings.HasSuffix(*a.Properties.VirtualNetwork.ID, "/virtualNetworks/vnet") {
			t.Fatalf("entry %s has no virtual network", *a.Name)
		}
	}
	sort.Strings(got)
	want := append(append([]string{}, ips...), "10.0.1.200")
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("addresses %v, want %v", got, want)
	}
	// The NICs lost the migrated pool, kept the other one.
	nic, err := v.net.NewInterfacesClient().Get(v.ctx, testRG, "nic1", nil)
	if err != nil {
		t.Fatal(err)
	}
	refs := nic.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools
	if len(refs) != 1 || !strings.EqualFold(*refs[0].ID, otherID) {
		t.Fatalf("nic1 pools %v", refs)
	}
	if n := len(members(after.Properties.BackendAddressPools[1])); n != 2 {
		t.Fatalf("other pool has %d members", n)
	}
	// A NIC may not start referencing the IP-based pool.
	_, err = v.putNIC("nic3", nicWithPools(subnet, poolID)...)
	if re := respErr(t, err); re.ErrorCode != "CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool" {
		t.Fatalf("new reference to an IP-based pool: %s", re.ErrorCode)
	}
	// Unknown pool, Basic load balancer.
	if resp := v.raw("POST", path, `{"pools":["nope"]}`, nil); resp.StatusCode != 400 {
		t.Fatalf("unknown pool: %d", resp.StatusCode)
	}
}
