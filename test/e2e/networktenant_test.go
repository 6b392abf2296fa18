package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestNetworkResourcesInAnotherTenant: the cluster's VMs are in one subscription and tenant,
// its network (VNet, NSG, route table, and the load balancers the CCM creates) in a second
// subscription that azsim puts in a second tenant, where ARM wants a token of that tenant plus
// a cluster-tenant token in x-ms-authorization-auxiliary. With networkResourceTenantID a
// LoadBalancer service converges; without it the CCM's network calls fail with ARM's
// wrong-tenant error naming the network tenant, and no service is served.
func TestNetworkResourcesInAnotherTenant(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	const (
		netTenant = "77777777-7777-7777-7777-777777777777"
		netSub    = "00000000-0000-0000-0000-0000000000aa"
	)
	ctx := context.Background()
	e := framework.Start(t, framework.Options{CloudConfig: map[string]any{
		"networkResourceSubscriptionID": netSub, "networkResourceTenantID": netTenant,
		// IP-based pools: the load balancer names node addresses, no NIC of the other tenant.
		"loadBalancerBackendPoolConfigurationType": "nodeIP",
	}})
	srv := e.Azure.Server
	creds := srv.Credentials()
	creds.Tenants = []string{netTenant}
	creds.SubscriptionTenants = map[string]string{netSub: netTenant}
	if err := srv.Identity().SetCredentials(creds); err != nil {
		t.Fatal(err)
	}
	// The network half of the default estate, in the network subscription.
	def := framework.DefaultTopology()
	if _, err := srv.Seed(ctx, &topology.Topology{SubscriptionID: netSub, ResourceGroups: def.ResourceGroups,
		VirtualNetworks: def.VirtualNetworks, NetworkSecurityGroups: def.NetworkSecurityGroups, RouteTables: def.RouteTables}); err != nil {
		t.Fatal(err)
	}
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	e.StartCCM()
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), lbWait)
	}
	l := &lbEnv{Env: e, t: t, rg: e.Azure.ResourceGroup, ns: "default"}
	l.create(lbService("web", nil))
	l.waitIP("web")
	lbID := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s", netSub, e.Azure.ResourceGroup, lbCluster)
	b, ok := srv.Engine().GetResource(lbID)
	if !ok {
		t.Fatalf("no load balancer %s in the network subscription", lbID)
	}
	var lb struct {
		Properties struct {
			LoadBalancingRules []json.RawMessage `json:"loadBalancingRules"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &lb); err != nil || len(lb.Properties.LoadBalancingRules) == 0 {
		t.Fatalf("load balancer in the network subscription has no rule (%v): %s", err, b)
	}
	if _, ok := srv.Engine().GetResource(fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s",
		e.Azure.SubscriptionID, e.Azure.ResourceGroup, lbCluster)); ok {
		t.Error("a load balancer was created in the cluster's subscription too")
	}

	// Without networkResourceTenantID: the network calls fail with ARM's wrong-tenant error.
	if err := e.StopCCM(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(e.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	logStart := len(before)
	if err := e.WriteCloudConfig(map[string]any{"networkResourceSubscriptionID": netSub,
		"loadBalancerBackendPoolConfigurationType": "nodeIP"}); err != nil {
		t.Fatal(err)
	}
	e.StartCCM()
	l.create(lbService("web2", nil, lbTCP(81)))
	// The first network call (the Basic to Standard migration's list of load balancers, which
	// then retries and holds services back for its 15-minute budget) fails with ARM's
	// wrong-tenant error naming the network tenant.
	// ARM names the tenant by its issuer URL, as Azure does ('https://<authority>/<tenant>/').
	want := "/" + netTenant + "/' associated with this subscription"
	l.waitFor("the CCM log shows InvalidAuthenticationTokenTenant naming the network tenant", func(context.Context) (bool, error) {
		b, err := os.ReadFile(e.CCMLogPath())
		if err != nil {
			return false, err
		}
		log := string(b[min(len(b), logStart):])
		if strings.Contains(log, "InvalidAuthenticationTokenTenant") && strings.Contains(log, want) {
			return true, nil
		}
		return false, fmt.Errorf("no InvalidAuthenticationTokenTenant error naming %s in the log", netTenant)
	}, lbWait)
	if ips := ingressIPs(l.get("web2")); len(ips) > 0 {
		t.Errorf("web2 got %v without access to the network tenant", ips)
	}
}
