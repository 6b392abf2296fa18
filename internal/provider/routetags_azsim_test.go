package provider

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// The configured tags reach the route table on creation and, after a drift or a changed
// configuration, on the route controller's next list; a user's own tag stays.
func TestRouteTableTags(t *testing.T) {
	e := startSim(t, testTopology(1), `,"tags":"env=prod","tagsMap":{"team":"net"}`)
	rp, _ := e.cloud.Routes()
	ctx := context.Background()
	m := e.res.Machines[0]
	if err := rp.CreateRoute(ctx, "kubernetes", "", &cloudprovider.Route{TargetNode: types.NodeName(m.NodeName), DestinationCIDR: "10.244.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	client := e.cloud.Clients.Network.NewRouteTablesClient()
	get := func() armnetwork.RouteTable {
		t.Helper()
		rt, err := client.Get(ctx, "rg", "rt", nil)
		if err != nil {
			t.Fatal(err)
		}
		return rt.RouteTable
	}
	rt := get()
	if rt.Tags["env"] == nil || *rt.Tags["env"] != "prod" || rt.Tags["team"] == nil || *rt.Tags["team"] != "net" {
		t.Fatalf("tags on creation %v", rt.Tags)
	}
	// Drift: a tag changed and a user tag added out of band.
	rt.Tags["env"], rt.Tags["user"] = to.Ptr("dev"), to.Ptr("mine")
	p, err := client.BeginCreateOrUpdate(ctx, "rg", "rt", rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	e.cloud.Writers.RouteTables.For(*rt.ID).Invalidate()
	if _, err := rp.ListRoutes(ctx, "kubernetes"); err != nil {
		t.Fatal(err)
	}
	rt = get()
	if *rt.Tags["env"] != "prod" || rt.Tags["user"] == nil || *rt.Tags["user"] != "mine" {
		t.Fatalf("tags after the list %v", rt.Tags)
	}
}
