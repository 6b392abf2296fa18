package loadbalancer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// consumerSub is the subscription of the private endpoints' owner.
const consumerSub = "00000000-0000-0000-0000-0000000000c0"

func (e *env) pls(t *testing.T, name string) *armnetwork.PrivateLinkService {
	t.Helper()
	resp, err := e.net.NewPrivateLinkServicesClient().Get(ctxT(t), testRG, name, nil)
	if err != nil {
		if strings.Contains(err.Error(), "NotFound") {
			return nil
		}
		t.Fatalf("PLS %s: %v", name, err)
	}
	return &resp.PrivateLinkService
}

func (e *env) plsNames(t *testing.T) []string {
	t.Helper()
	var out []string
	pager := e.net.NewPrivateLinkServicesClient().NewListPager(testRG, nil)
	for pager.More() {
		page, err := pager.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Value {
			out = append(out, *p.Name)
		}
	}
	return out
}

func eventsWith(e *env, reason string) []string {
	var out []string
	for _, ev := range drain(e) {
		if strings.Contains(ev, reason) {
			out = append(out, ev)
		}
	}
	return out
}

// The lifecycle of a service's private link service against azsim: created on the internal
// frontend with its NAT subnet's policies disabled, every annotation applied in place, a
// consumer's connection, the annotation removed (the PLS goes, the frontend stays), the service
// deleted (connections first, nothing left) — and a user's PLS on another frontend untouched.
func TestPrivateLinkServiceLifecycle(t *testing.T) {
	e := newEnv(t, "nodeIP")
	ctx := ctxT(t)
	// A user's own load balancer with a PLS the CCM must never touch.
	if _, err := e.srv.Seed(ctx, &topology.Topology{
		ResourceGroups: []string{testRG},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: testRG, Name: "user-vnet", AddressPrefixes: []string{"172.16.0.0/16"},
			Subnets: []topology.Subnet{{Name: "user", AddressPrefix: "172.16.0.0/24", PrivateLinkServiceNetworkPolicies: "Disabled"}}}},
		LoadBalancers: []topology.LoadBalancer{{ResourceGroup: testRG, Name: "users-lb", Frontends: []topology.Frontend{
			{Name: "fe", Subnet: &topology.SubnetRef{VNet: "user-vnet", Name: "user"}}}}},
		PrivateLinkServices: []topology.PrivateLinkService{{ResourceGroup: testRG, Name: "users-pls", LoadBalancer: "users-lb", Frontend: "fe",
			Subnet: topology.SubnetRef{VNet: "user-vnet", Name: "user"}}},
	}); err != nil {
		t.Fatal(err)
	}
	userETag := *e.pls(t, "users-pls").Etag

	nodes := []*v1.Node{node("node-0", "10.240.0.4", nil)}
	svc := service("cccccccc-0000-0000-0000-000000000001", "private", map[string]string{
		annotations.Internal: "true", annotations.PLSCreate: "true"})
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	fe := naming.ServiceLBName(svc.UID)
	name := "pls-" + fe
	p := e.pls(t, name)
	if p == nil {
		t.Fatalf("no PLS %s; have %v", name, e.plsNames(t))
	}
	if got := *p.Properties.LoadBalancerFrontendIPConfigurations[0].ID; !strings.HasSuffix(got, "/loadBalancers/"+testCluster+"-internal/frontendIPConfigurations/"+fe) {
		t.Fatalf("PLS frontend %s", got)
	}
	nat := p.Properties.IPConfigurations
	if len(nat) != 1 || !strings.HasSuffix(*nat[0].Properties.Subnet.ID, "/subnets/subnet") || *p.Tags[plan.TagPLSOwner] != "default/private" ||
		*p.Tags[plan.TagPLSCluster] != testCluster || p.Properties.Alias == nil {
		t.Fatalf("PLS %s", mustJSONT(t, p))
	}
	alias := *p.Properties.Alias
	sn, err := e.net.NewSubnetsClient().Get(ctx, testRG, "vnet", "subnet", nil)
	if err != nil || *sn.Properties.PrivateLinkServiceNetworkPolicies != armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled {
		t.Fatalf("NAT subnet policies %v %v", err, sn.Properties.PrivateLinkServiceNetworkPolicies)
	}
	if evs := eventsWith(e, ReasonPLSCreated); len(evs) != 1 || !strings.Contains(evs[0], alias) {
		t.Fatalf("creation events %v", evs)
	}
	// Steady state: no write.
	before := e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if w := e.writes(t); w != before {
		t.Fatalf("a second reconcile wrote %d times", w-before)
	}
	if evs := eventsWith(e, ReasonPLSUpdated); len(evs) != 0 {
		t.Fatalf("a reconcile that changed nothing says it updated the PLS: %v", evs)
	}

	// Every annotation changed: applied in place (same name, same alias).
	svc.Annotations[annotations.PLSIPAddressCount] = "2"
	svc.Annotations[annotations.PLSIPAddresses] = "10.240.0.200"
	svc.Annotations[annotations.PLSFQDNs] = "a.example.com b.example.com"
	svc.Annotations[annotations.PLSProxyProtocol] = "true"
	svc.Annotations[annotations.PLSVisibility] = "*"
	svc.Annotations[annotations.PLSAutoApproval] = consumerSub
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	p = e.pls(t, name)
	pp := p.Properties
	if *pp.Alias != alias || len(pp.IPConfigurations) != 2 || !*pp.EnableProxyProtocol || len(pp.Fqdns) != 2 ||
		*pp.Visibility.Subscriptions[0] != "*" || *pp.AutoApproval.Subscriptions[0] != consumerSub {
		t.Fatalf("PLS after the update %s", mustJSONT(t, p))
	}
	var static bool
	for _, c := range pp.IPConfigurations {
		static = static || (c.Properties.PrivateIPAddress != nil && *c.Properties.PrivateIPAddress == "10.240.0.200" && *c.Properties.Primary)
	}
	if !static {
		t.Fatalf("static primary NAT address missing: %s", mustJSONT(t, pp.IPConfigurations))
	}
	if evs := eventsWith(e, ReasonPLSUpdated); len(evs) != 1 {
		t.Fatalf("update events %v, want one", evs)
	}
	// A rename is refused, nothing written.
	svc.Annotations[annotations.PLSName] = "another-name"
	before = e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err == nil || !strings.Contains(err.Error(), "renamed") {
		t.Fatalf("rename: %v", err)
	}
	if w := e.writes(t); w != before || e.pls(t, "another-name") != nil {
		t.Fatalf("a refused rename wrote %d times", w-before)
	}
	if len(eventsWith(e, ReasonPLSRefused)) == 0 {
		t.Fatal("no PrivateLinkServiceRefused event")
	}
	delete(svc.Annotations, annotations.PLSName)

	// A consumer connects from its network in another subscription, auto-approved.
	res, err := e.srv.Seed(ctx, &topology.Topology{SubscriptionID: consumerSub, ResourceGroups: []string{"consumer"},
		VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "consumer", Name: "cvnet", AddressPrefixes: []string{"192.168.0.0/16"},
			Subnets: []topology.Subnet{{Name: "pe", AddressPrefix: "192.168.1.0/24"}}}},
		PrivateEndpoints: []topology.PrivateEndpoint{
			{ResourceGroup: "consumer", Name: "pe", Subnet: topology.SubnetRef{ResourceGroup: "consumer", VNet: "cvnet", Name: "pe"},
				PrivateLinkService: alias}}})
	if err != nil || len(res.PrivateEndpoints) != 1 || res.PrivateEndpoints[0].ConnectionState != "Approved" {
		t.Fatalf("private endpoint: %v %+v", err, res)
	}
	// Updates do not cut the connection.
	svc.Annotations[annotations.PLSFQDNs] = "a.example.com"
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if conns := plan.ConnectionNames(e.pls(t, name)); len(conns) != 1 {
		t.Fatalf("connections after an update: %v", conns)
	}

	// The annotation removed: the PLS goes (its connection first), the frontend stays.
	delete(svc.Annotations, annotations.PLSCreate)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if e.pls(t, name) != nil {
		t.Fatal("PLS left after the annotation was removed")
	}
	if evs := eventsWith(e, ReasonPLSDeleted); len(evs) != 1 || !strings.Contains(evs[0], "pe.") {
		t.Fatalf("deletion events %v (want the connection named)", evs)
	}
	if !plan.OwnsFrontend(e.getLB(t, testCluster+"-internal"), fe) {
		t.Fatal("frontend removed with the PLS")
	}

	// Back again, then the service is deleted: nothing of it is left.
	svc.Annotations[annotations.PLSCreate] = "true"
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if e.pls(t, name) == nil {
		t.Fatal("PLS not recreated")
	}
	if err := e.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if got := e.plsNames(t); len(got) != 1 || got[0] != "users-pls" {
		t.Fatalf("private link services left: %v", got)
	}
	if _, err := e.net.NewLoadBalancersClient().Get(ctx, testRG, testCluster+"-internal", nil); err == nil {
		t.Fatal("the internal load balancer was not deleted")
	}
	if *e.pls(t, "users-pls").Etag != userETag {
		t.Fatal("the user's PLS was changed")
	}
}

// A public service with floating IP gets no private link service: the annotation is refused,
// nothing is written.
func TestPrivateLinkServiceNeedsInternalOrNoFloatingIP(t *testing.T) {
	e := newEnv(t, "nodeIP")
	ctx := ctxT(t)
	svc := service("cccccccc-0000-0000-0000-000000000002", "public", map[string]string{annotations.PLSCreate: "true"})
	before := e.writes(t)
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, nil); err == nil {
		t.Fatal("accepted")
	}
	if w := e.writes(t); w != before {
		t.Fatalf("%d writes", w-before)
	}
	// Without floating IP, a public service may have one.
	svc.Annotations[annotations.DisableFloatingIP] = "true"
	if _, err := e.lb.EnsureLoadBalancer(ctx, testCluster, svc, []*v1.Node{node("node-0", "10.240.0.4", nil)}); err != nil {
		t.Fatal(err)
	}
	if e.pls(t, "pls-"+naming.ServiceLBName(svc.UID)) == nil {
		t.Fatalf("no PLS on the public frontend; have %v", e.plsNames(t))
	}
}

func mustJSONT(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
