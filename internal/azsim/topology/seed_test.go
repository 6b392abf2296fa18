package topology

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

func TestSeedNetworkThroughEngine(t *testing.T) {
	e := arm.NewEngine(arm.Config{LRODuration: 30 * time.Millisecond})
	network.Register(e)
	topo, err := Parse([]byte(`
location: westeurope
resourceGroups: [rg-a]
networkSecurityGroups: [{resourceGroup: rg-a, name: nsg}]
routeTables: [{resourceGroup: rg-a, name: rt}]
virtualNetworks:
- {resourceGroup: rg-b, name: vnet, addressPrefixes: [10.0.0.0/8],
   subnets: [{name: s1, addressPrefix: 10.1.0.0/16}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := Seed(ctx, e, topo, SeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SubscriptionID != DefaultSubscriptionID || res.Location != "westeurope" || len(res.Machines) != 0 {
		t.Errorf("result = %+v", res)
	}
	sub := "/subscriptions/" + DefaultSubscriptionID
	for _, id := range []string{
		sub + "/resourceGroups/rg-a",
		sub + "/resourceGroups/rg-b",
		sub + "/resourceGroups/rg-a/providers/Microsoft.Network/networkSecurityGroups/nsg",
		sub + "/resourceGroups/rg-b/providers/Microsoft.Network/virtualNetworks/vnet/subnets/s1",
	} {
		b, ok := e.GetResource(id)
		if !ok {
			t.Errorf("%s not created", id)
			continue
		}
		if strings.Contains(id, "/virtualNetworks/") && !strings.Contains(string(b), `"Succeeded"`) {
			t.Errorf("%s not provisioned: %s", id, b)
		}
	}

	// A bad seed reports the engine's refusal.
	bad := &Topology{VirtualNetworks: []VirtualNetwork{{ResourceGroup: "rg-a", Name: "bad", AddressPrefixes: []string{"not-a-cidr"}}}}
	if _, err := Seed(ctx, e, bad, SeedOptions{Decorate: func(r *http.Request) *http.Request { return r }}); err == nil {
		t.Error("invalid address prefix accepted")
	}
}
