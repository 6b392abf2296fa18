package topology

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

const provider = `
resourceGroups: [rg]
virtualNetworks:
- resourceGroup: rg
  name: vnet
  addressPrefixes: [10.0.0.0/16]
  subnets:
  - {name: nodes, addressPrefix: 10.0.1.0/24}
  - {name: pls, addressPrefix: 10.0.2.0/24, privateLinkServiceNetworkPolicies: Disabled}
loadBalancers:
- resourceGroup: rg
  name: user-lb
  frontends: [{name: fe, subnet: {name: nodes}}]
privateLinkServices:
- resourceGroup: rg
  name: user-pls
  loadBalancer: user-lb
  frontend: fe
  subnet: {name: pls}
  ipCount: 2
  staticIPs: [10.0.2.10]
  visibility: ["*"]
  autoApproval: [00000000-0000-0000-0000-0000000000c0]
  fqdns: [user.example.com]
  tags: {owner: user}
privateEndpoints:
- {resourceGroup: rg, name: own, subnet: {name: nodes}, privateLinkService: user-pls}
`

func consumerTopology(sub, target string, manual bool) *Topology {
	return &Topology{SubscriptionID: sub, VirtualNetworks: []VirtualNetwork{{ResourceGroup: "consumer", Name: "cvnet",
		AddressPrefixes: []string{"192.168.0.0/16"}, Subnets: []Subnet{{Name: "pe", AddressPrefix: "192.168.1.0/24"}}}},
		PrivateEndpoints: []PrivateEndpoint{{ResourceGroup: "consumer", Name: "pe", PrivateLinkService: target, Manual: manual,
			RequestMessage: "let me in", PrivateIP: "192.168.1.50"}}}
}

// TestSeedPrivateLink seeds a provider's private link service and consumers'
// endpoints in other subscriptions, as e2e tests do.
func TestSeedPrivateLink(t *testing.T) {
	e := arm.NewEngine(arm.Config{LRODuration: 20 * time.Millisecond})
	network.Register(e)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topo, err := Parse([]byte(provider))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Seed(ctx, e, topo, SeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PrivateLinkServices) != 1 || len(res.PrivateEndpoints) != 1 {
		t.Fatalf("result %+v", res)
	}
	pls := res.PrivateLinkServices[0]
	if !strings.HasPrefix(pls.Alias, "user-pls.") || len(pls.NATIPs) != 2 || pls.NATIPs[0] != "10.0.2.10" || !strings.HasPrefix(pls.NATIPs[1], "10.0.2.") {
		t.Fatalf("seeded service %+v", pls)
	}
	if own := res.PrivateEndpoints[0]; own.ConnectionState != network.StateApproved || own.PrivateLinkService != pls.ID || !strings.HasPrefix(own.PrivateIP, "10.0.1.") {
		t.Fatalf("owner's endpoint %+v", own)
	}

	// A consumer asking by alias waits; an auto-approved one is in at once.
	b, err := Seed(ctx, e, consumerTopology("00000000-0000-0000-0000-0000000000b0", pls.Alias, true), SeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pe := b.PrivateEndpoints[0]; pe.ConnectionState != network.StatePending || pe.PrivateIP != "192.168.1.50" {
		t.Fatalf("consumer endpoint %+v", pe)
	}
	c, err := Seed(ctx, e, consumerTopology("00000000-0000-0000-0000-0000000000c0", pls.ID, false), SeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pe := c.PrivateEndpoints[0]; pe.ConnectionState != network.StateApproved {
		t.Fatalf("auto-approved endpoint %+v", pe)
	}
	// An automatic request without approval right fails the seed with NRP's answer.
	_, err = Seed(ctx, e, consumerTopology("00000000-0000-0000-0000-0000000000d0", pls.ID, false), SeedOptions{})
	if err == nil || !strings.Contains(err.Error(), "LinkedAuthorizationFailed") {
		t.Fatalf("got %v", err)
	}
	raw, ok := e.GetResource(pls.ID)
	if !ok || strings.Count(string(raw), `"privateEndpoint":`) != 3 {
		t.Fatalf("service connections: %s", raw)
	}
}

func TestNormalizePrivateLinkErrors(t *testing.T) {
	base := `
virtualNetworks: [{resourceGroup: rg, name: v, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.1.0.0/16}]}]
loadBalancers: [{resourceGroup: rg, name: lb, frontends: [{name: f}]}]
`
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown load balancer", `privateLinkServices: [{resourceGroup: rg, name: p, loadBalancer: nope, frontend: f}]`, "loadBalancer rg/nope is not in the topology"},
		{"unknown frontend", `privateLinkServices: [{resourceGroup: rg, name: p, loadBalancer: lb, frontend: g}]`, `has no frontend "g"`},
		{"too many addresses", `privateLinkServices: [{resourceGroup: rg, name: p, loadBalancer: lb, frontend: f, ipCount: 9}]`, "ipCount 9"},
		{"bad static address", `privateLinkServices: [{resourceGroup: rg, name: p, loadBalancer: lb, frontend: f, staticIPs: [x]}]`, "not an IP address"},
		{"unknown service", `privateEndpoints: [{resourceGroup: rg, name: e, privateLinkService: nope}]`, `names 0 services`},
		{"no target", `privateEndpoints: [{resourceGroup: rg, name: e}]`, "needs privateLinkService"},
	} {
		t.Run(c.name, func(t *testing.T) {
			topo, err := Parse([]byte(base + c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := topo.Normalize(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	topo, err := Parse([]byte(`
virtualNetworks: [{resourceGroup: rg, name: w, addressPrefixes: [10.0.0.0/8], subnets: [{name: s, addressPrefix: 10.1.0.0/16, privateLinkServiceNetworkPolicies: Off}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topo.Normalize(); err == nil || !strings.Contains(err.Error(), "must be Enabled or Disabled") {
		t.Fatalf("bad policies: %v", err)
	}
}
