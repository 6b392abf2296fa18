package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestNetworkResourcesInAnotherTenant: the cluster's VMs are in one subscription and tenant,
// its network (VNet, NSG, route table, and the load balancers the CCM creates) in a second
// subscription that azsim puts in a second tenant, where ARM wants a token of that tenant plus
// a cluster-tenant token in x-ms-authorization-auxiliary. With networkResourceTenantID a
// LoadBalancer service converges; without it the service fails with ARM's wrong-tenant error
// in its event.
func TestNetworkResourcesInAnotherTenant(t *testing.T) {
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
	creds.OtherTenants = []string{netTenant}
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
	if err := e.WriteCloudConfig(map[string]any{"networkResourceSubscriptionID": netSub,
		"loadBalancerBackendPoolConfigurationType": "nodeIP"}); err != nil {
		t.Fatal(err)
	}
	e.StartCCM()
	l.create(lbService("web2", nil, lbTCP(81)))
	l.waitFor("web2 fails with InvalidAuthenticationTokenTenant", func(ctx context.Context) (bool, error) {
		evs, err := e.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web2"})
		if err != nil {
			return false, err
		}
		var reasons []string
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "InvalidAuthenticationTokenTenant") && strings.Contains(ev.Message, netTenant) {
				t.Logf("event %s: %.300s", ev.Reason, ev.Message)
				return true, nil
			}
			reasons = append(reasons, ev.Reason)
		}
		return false, fmt.Errorf("no Warning naming InvalidAuthenticationTokenTenant and tenant %s (events %v)", netTenant, reasons)
	}, lbWait)
}
