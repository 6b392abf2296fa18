package drift_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

const rg = "rg"

func id(typ, name string) string {
	return "/subscriptions/" + topology.DefaultSubscriptionID + "/resourceGroups/" + rg + "/providers/" + typ + "/" + name
}

var (
	lbID  = id("Microsoft.Network/loadBalancers", "lb")
	nsgID = id("Microsoft.Network/networkSecurityGroups", "nsg")
)

// put writes a document through the engine, as a test's own setup.
func put(t *testing.T, s *server.Server, id string, doc map[string]any) {
	t.Helper()
	b, _ := json.Marshal(doc)
	req := httptest.NewRequest(http.MethodPut, s.URL()+id+"?api-version="+topology.NetworkAPIVersion, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer test")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.Engine().ServeHTTP(rec, req)
	if rec.Code >= 300 {
		t.Fatalf("PUT %s: %d %s", id, rec.Code, rec.Body.String())
	}
}

func get(t *testing.T, c *client.Client, id string) map[string]any {
	t.Helper()
	doc, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func names(doc map[string]any, field string) []string {
	var out []string
	for _, m := range arm.Arr(doc, "properties", field) {
		out = append(out, arm.Str(m, "name"))
	}
	return out
}

func TestDriftKinds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.Start(ctx, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	c := s.Client()
	pool := topology.PoolRef{LoadBalancer: "lb", Pool: "pool"}
	res, err := s.Seed(ctx, &topology.Topology{
		ResourceGroups: []string{rg},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: rg, Name: "v", AddressPrefixes: []string{"10.0.0.0/16"},
			Subnets: []topology.Subnet{{Name: "s", AddressPrefix: "10.0.0.0/20"}}}},
		NetworkSecurityGroups: []topology.Named{{ResourceGroup: rg, Name: "nsg"}},
		PublicIPs:             []topology.PublicIP{{ResourceGroup: rg, Name: "pip-a"}},
		LoadBalancers: []topology.LoadBalancer{{ResourceGroup: rg, Name: "lb", Frontends: []topology.Frontend{{Name: "fe", PublicIP: "pip-a"}},
			BackendPools: []string{"pool"}, Rules: []topology.Rule{{Name: "r", Frontend: "fe", BackendPool: "pool", Port: 80}}}},
		VirtualMachines: []topology.VirtualMachine{{ResourceGroup: rg, Name: "vm0", Subnet: topology.SubnetRef{VNet: "v", Name: "s"},
			LoadBalancerPools: []topology.PoolRef{pool}}},
		ScaleSets: []topology.ScaleSet{{ResourceGroup: rg, Name: "ss", Capacity: 1, Subnet: topology.SubnetRef{VNet: "v", Name: "s"},
			LoadBalancerPools: []topology.PoolRef{pool}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	// A probe, an IP-based pool with one address and an NSG rule, as a cluster would have them.
	lb := get(t, c, lbID)
	props := arm.Props(lb)
	probes, _ := props["probes"].([]any)
	props["probes"] = append(probes, map[string]any{"name": "p", "properties": map[string]any{"protocol": "Tcp", "port": 30080,
		"intervalInSeconds": 5, "numberOfProbes": 2}})
	props["backendAddressPools"] = append(props["backendAddressPools"].([]any), map[string]any{"name": "ips", "properties": map[string]any{
		"loadBalancerBackendAddresses": []any{map[string]any{"name": "node-0", "properties": map[string]any{"ipAddress": "10.0.0.50",
			"virtualNetwork": map[string]any{"id": id("Microsoft.Network/virtualNetworks", "v")}}}}}})
	delete(lb, "etag")
	put(t, s, lbID, lb)
	put(t, s, nsgID, map[string]any{"location": arm.Str(lb, "location"), "properties": map[string]any{"securityRules": []any{
		map[string]any{"name": "allow", "properties": map[string]any{"protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": "80",
			"sourceAddressPrefix": "Internet", "destinationAddressPrefix": "203.0.113.9", "access": "Allow", "priority": 500, "direction": "Inbound"}}}}})
	if err := c.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}

	etag := func(id string) string { return arm.Str(get(t, c, id), "etag") }
	apply := func(r drift.Request) drift.Result {
		t.Helper()
		before := etag(r.Resource)
		out, err := c.Drift(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v", r.Kind, err)
		}
		if etag(r.Resource) == before && r.Kind != drift.RemovePoolMember {
			t.Errorf("%s: the ETag of %s did not change", r.Kind, r.Resource)
		}
		return out
	}

	apply(drift.Request{Kind: drift.DeleteRule, Resource: lbID, Name: "R"})
	if got := names(get(t, c, lbID), "loadBalancingRules"); len(got) != 0 {
		t.Errorf("rules after delete-rule: %v", got)
	}

	apply(drift.Request{Kind: drift.ChangeProbe, Resource: lbID, Name: "p"})
	probe := func() map[string]any {
		for _, p := range arm.Arr(get(t, c, lbID), "properties", "probes") {
			if arm.Str(p, "name") == "p" {
				return p
			}
		}
		t.Fatal("probe p missing")
		return nil
	}
	if p := probe(); arm.Props(p)["intervalInSeconds"] != float64(10) {
		t.Errorf("probe after change-probe: %v", arm.Props(p))
	}
	apply(drift.Request{Kind: drift.ChangeProbe, Resource: lbID, Name: "p", IntervalInSeconds: 7})
	if p := probe(); arm.Props(p)["intervalInSeconds"] != float64(7) {
		t.Errorf("probe after change-probe to 7: %v", arm.Props(p))
	}

	apply(drift.Request{Kind: drift.RemoveNSGRule, Resource: nsgID, Name: "allow"})
	if got := names(get(t, c, nsgID), "securityRules"); len(got) != 0 {
		t.Errorf("NSG rules after remove-nsg-rule: %v", got)
	}

	// IP-based pool entry, by IP address.
	out := apply(drift.Request{Kind: drift.RemovePoolMember, Resource: lbID, Pool: "ips", Name: "10.0.0.50"})
	if !slices.Equal(out.Written, []string{lbID}) {
		t.Errorf("written %v", out.Written)
	}
	poolOf := func(name string) map[string]any {
		for _, p := range arm.Arr(get(t, c, lbID), "properties", "backendAddressPools") {
			if arm.Str(p, "name") == name {
				return p
			}
		}
		t.Fatalf("pool %s missing", name)
		return nil
	}
	if got := arm.Arr(poolOf("ips"), "properties", "loadBalancerBackendAddresses"); len(got) != 0 {
		t.Errorf("pool entries after remove-pool-member: %v", got)
	}

	// NIC-based members: the VM's NIC and the scale set instance are written without the pool.
	refs := arm.Arr(poolOf("pool"), "properties", "backendIPConfigurations")
	if len(refs) != 2 {
		t.Fatalf("pool members %v, want the VM's and the instance's", refs)
	}
	for _, ref := range refs {
		member := arm.Str(ref, "id")
		before := etag(lbID)
		out := apply(drift.Request{Kind: drift.RemovePoolMember, Resource: lbID, Pool: "pool", Name: member})
		if len(out.Written) != 1 || strings.EqualFold(out.Written[0], lbID) {
			t.Errorf("%s: written %v, want the NIC or scale set VM", member, out.Written)
		}
		for _, r := range arm.Arr(poolOf("pool"), "properties", "backendIPConfigurations") {
			if strings.EqualFold(arm.Str(r, "id"), member) {
				t.Errorf("%s is still a member", member)
			}
		}
		if etag(lbID) == before {
			t.Logf("note: the load balancer's ETag did not move with its back-references")
		}
	}

	out = apply(drift.Request{Kind: drift.ChangeFrontendIP, Resource: lbID, Name: "fe"})
	newPIP := id("Microsoft.Network/publicIPAddresses", "fe-drift")
	if !slices.Equal(out.Written, []string{newPIP, lbID}) {
		t.Errorf("change-frontend-ip wrote %v", out.Written)
	}
	fe := arm.Arr(get(t, c, lbID), "properties", "frontendIPConfigurations")[0]
	if got := arm.Str(arm.Props(fe), "publicIPAddress", "id"); !strings.EqualFold(got, newPIP) {
		t.Errorf("frontend public IP = %s, want %s", got, newPIP)
	}
	apply(drift.Request{Kind: drift.ChangeFrontendIP, Resource: lbID, Name: "fe", PublicIP: id("Microsoft.Network/publicIPAddresses", "pip-a")})

	for _, bad := range []drift.Request{
		{Kind: "explode", Resource: lbID, Name: "x"},
		{Kind: drift.DeleteRule, Resource: lbID, Name: "missing"},
		{Kind: drift.ChangeProbe, Resource: lbID, Name: "missing"},
		{Kind: drift.RemovePoolMember, Resource: lbID, Pool: "pool", Name: "nobody"},
		{Kind: drift.RemovePoolMember, Resource: lbID, Name: "nobody"},
		{Kind: drift.DeleteRule, Resource: id("Microsoft.Network/loadBalancers", "nope"), Name: "r"},
		{Kind: drift.DeleteRule, Resource: lbID},
	} {
		if _, err := c.Drift(ctx, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}

	// The edits are the test's: azsim's counters (the client under test's requests) do not
	// count them.
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Requests {
		if r.Method != http.MethodGet {
			t.Errorf("a drift edit was counted: %+v", r)
		}
	}
}
