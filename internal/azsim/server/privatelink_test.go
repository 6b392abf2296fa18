package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

const consumerSub = "00000000-0000-0000-0000-00000000b0b0"

// TestPrivateLinkThroughServer is the path e2e tests take: a provider network
// seeded in the default subscription, a private link service created by a
// client through the front door (counted per type), a consumer subscription
// seeded with an endpoint, the owner's approval through the control API.
func TestPrivateLinkThroughServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := start(t, Options{IMDSAddr: "off"})
	c := s.Client()
	if _, err := c.SeedYAML(ctx, []byte(`
resourceGroups: [rg-cluster]
virtualNetworks:
- resourceGroup: rg-cluster
  name: vnet
  addressPrefixes: [10.0.0.0/8]
  subnets:
  - {name: subnet, addressPrefix: 10.240.0.0/16}
  - {name: pls, addressPrefix: 10.241.0.0/24, privateLinkServiceNetworkPolicies: Disabled}
loadBalancers:
- {resourceGroup: rg-cluster, name: kubernetes-internal, frontends: [{name: fe, subnet: {name: subnet}}]}
`)); err != nil {
		t.Fatal(err)
	}
	f := networkClients(t, s, secretCredential(t, s))
	lbID := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/loadBalancers/kubernetes-internal"
	natSubnet := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/pls"
	p, err := f.NewPrivateLinkServicesClient().BeginCreateOrUpdate(ctx, rg, "pls-fe", armnetwork.PrivateLinkService{
		Location: to.Ptr("eastus"),
		Properties: &armnetwork.PrivateLinkServiceProperties{
			LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: to.Ptr(lbID + "/frontendIPConfigurations/fe")}},
			IPConfigurations: []*armnetwork.PrivateLinkServiceIPConfiguration{{Name: to.Ptr("nat"), Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
				Subnet: &armnetwork.Subnet{ID: &natSubnet}, Primary: to.Ptr(true), PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic)}}},
			Visibility: &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{to.Ptr(consumerSub)}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pls, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counted := false
	for _, r := range stats.Requests {
		counted = counted || (r.ResourceType == "Microsoft.Network/privateLinkServices" && r.Method == "PUT" && r.Status == 201)
	}
	if !counted {
		t.Fatalf("no PUT of Microsoft.Network/privateLinkServices in %+v", stats.Requests)
	}

	// The consumer: another subscription, seeded with a VNet and an endpoint asking by alias.
	res, err := c.Seed(ctx, &topology.Topology{SubscriptionID: consumerSub,
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "consumer", Name: "cvnet", AddressPrefixes: []string{"192.168.0.0/16"},
			Subnets: []topology.Subnet{{Name: "pe", AddressPrefix: "192.168.1.0/24"}}}},
		PrivateEndpoints: []topology.PrivateEndpoint{{ResourceGroup: "consumer", Name: "pe", PrivateLinkService: *pls.Properties.Alias, Manual: true}}})
	if err != nil {
		t.Fatal(err)
	}
	pe := res.PrivateEndpoints[0]
	if res.SubscriptionID != consumerSub || pe.ConnectionState != "Pending" || !strings.HasPrefix(pe.PrivateIP, "192.168.1.") {
		t.Fatalf("consumer seed %+v", res)
	}
	// The owner approves through the control API; the endpoint sees it.
	doc, err := c.Get(ctx, *pls.ID)
	if err != nil {
		t.Fatal(err)
	}
	conns, _ := doc["properties"].(map[string]any)["privateEndpointConnections"].([]any)
	if len(conns) != 1 {
		t.Fatalf("connections %v", conns)
	}
	connID, _ := conns[0].(map[string]any)["id"].(string)
	if err := c.ConnectionAction(ctx, connID, "approve", "welcome"); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectionAction(ctx, connID, "ignore", ""); err == nil {
		t.Error("unknown action accepted")
	}
	if err := c.ConnectionAction(ctx, *pls.ID, "approve", ""); err == nil {
		t.Error("a service ID accepted as a connection ID")
	}
	peDoc, err := c.Get(ctx, pe.ID)
	if err != nil {
		t.Fatal(err)
	}
	st := peDoc["properties"].(map[string]any)["manualPrivateLinkServiceConnections"].([]any)[0].(map[string]any)["properties"].(map[string]any)["privateLinkServiceConnectionState"].(map[string]any)
	if st["status"] != "Approved" || st["description"] != "welcome" {
		t.Fatalf("endpoint state %v", st)
	}
	if pes, err := c.List(ctx, "Microsoft.Network/privateEndpoints"); err != nil || len(pes) != 1 {
		t.Fatalf("endpoints %v %v", pes, err)
	}
	if err := c.ConnectionAction(ctx, connID, "remove", ""); err != nil {
		t.Fatal(err)
	}
	if doc, _ := c.Get(ctx, *pls.ID); len(doc["properties"].(map[string]any)["privateEndpointConnections"].([]any)) != 0 {
		t.Fatal("connection not removed")
	}
}
