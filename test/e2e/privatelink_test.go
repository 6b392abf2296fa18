package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// plsConsumer is the subscription of the private endpoints' owner.
const plsConsumer = "00000000-0000-0000-0000-0000000000c0"

// plsVisibleOnly is a subscription the service is visible to ("*") but not auto-approved for.
const plsVisibleOnly = "00000000-0000-0000-0000-0000000000c1"

// plsTopology is the LB topology plus a NAT subnet for private link services (policies
// enabled, as Azure creates subnets: the CCM must disable them) and a user's own load balancer
// with its own private link service, which the CCM must never touch.
func plsTopology() *topology.Topology {
	t := lbTopology()
	vnet := &t.VirtualNetworks[0]
	vnet.Subnets = append(vnet.Subnets, topology.Subnet{Name: "pls-nat", AddressPrefix: "10.240.32.0/24"},
		topology.Subnet{Name: "user-pls", AddressPrefix: "10.240.33.0/24", PrivateLinkServiceNetworkPolicies: "Disabled"})
	rg := t.ResourceGroups[0]
	t.LoadBalancers = append(t.LoadBalancers, topology.LoadBalancer{ResourceGroup: rg, Name: "users-lb",
		Frontends: []topology.Frontend{{Name: "fe", Subnet: &topology.SubnetRef{VNet: vnet.Name, Name: "user-pls"}}}})
	t.PrivateLinkServices = append(t.PrivateLinkServices, topology.PrivateLinkService{ResourceGroup: rg, Name: "users-pls",
		LoadBalancer: "users-lb", Frontend: "fe", Subnet: topology.SubnetRef{VNet: vnet.Name, Name: "user-pls"}})
	return t
}

func (l *lbEnv) plsList(ctx context.Context) (map[string]*armnetwork.PrivateLinkService, error) {
	out := map[string]*armnetwork.PrivateLinkService{}
	pager := l.net.NewPrivateLinkServicesClient().NewListPager(l.rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range page.Value {
			out[*p.Name] = p
		}
	}
	return out, nil
}

// waitPLS waits until the private link service name exists and satisfies ok, and returns it.
func (l *lbEnv) waitPLS(what, name string, ok func(p *armnetwork.PrivateLinkService) error) *armnetwork.PrivateLinkService {
	l.t.Helper()
	var got *armnetwork.PrivateLinkService
	l.waitFor(what, func(ctx context.Context) (bool, error) {
		all, err := l.plsList(ctx)
		if err != nil {
			return false, err
		}
		if got = all[name]; got == nil {
			return false, fmt.Errorf("no private link service %s (have %v)", name, sortedKeys(all))
		}
		if err := ok(got); err != nil {
			return false, err
		}
		return true, nil
	}, lbWait)
	return got
}

func (l *lbEnv) waitPLSGone(what, name string) {
	l.t.Helper()
	l.waitFor(what, func(ctx context.Context) (bool, error) {
		all, err := l.plsList(ctx)
		if err != nil {
			return false, err
		}
		if all[name] != nil {
			return false, fmt.Errorf("private link service %s still exists", name)
		}
		return true, nil
	}, lbWait)
}

// serviceEvent waits for an event of reason on the service whose message contains text.
func (l *lbEnv) serviceEvent(name, reason, text string) {
	l.t.Helper()
	l.waitFor(fmt.Sprintf("event %s on %s", reason, name), func(ctx context.Context) (bool, error) {
		evs, err := l.Kube.CoreV1().Events(l.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event mentioning %q yet", reason, text)
	}, lbWait)
}

func setAnnotation(s *corev1.Service, k, v string) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[k] = v
}

func connectionStates(p *armnetwork.PrivateLinkService) []string {
	var out []string
	for _, c := range p.Properties.PrivateEndpointConnections {
		if c.Properties != nil && c.Properties.PrivateLinkServiceConnectionState != nil {
			out = append(out, *c.Name+"="+deref(c.Properties.PrivateLinkServiceConnectionState.Status))
		}
	}
	slices.Sort(out)
	return out
}

// TestPrivateLinkService is the Private Link Service feature on a local cluster against azsim:
// a PLS on an internal service's frontend with its NAT subnet's policies disabled, every
// annotation applied in place, consumers connecting from another subscription (a manual request
// pending until approved, an auto-approved one at once) and kept across updates, a retried ARM
// failure, a CCM restart in the middle of a change, a switch to public without floating IP
// disabled refused with nothing deleted, the annotation removed (PLS gone, frontend kept), the
// service deleted (nothing left) — and a user's PLS untouched throughout.
func TestPrivateLinkService(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{Topology: plsTopology(), CloudConfig: lbNodeIPConfig})
	ctx := lbCtx(t)
	users, err := l.net.NewPrivateLinkServicesClient().Get(ctx, l.rg, "users-pls", nil)
	if err != nil {
		t.Fatal(err)
	}
	usersETag := *users.Etag

	svc := l.create(lbService("pls-web", map[string]string{annotations.Internal: "true", annotations.PLSCreate: "true",
		annotations.PLSSubnet: "pls-nat"}))
	l.waitIP(svc.Name)
	fe := azurenames.ServiceLBName(svc.UID)
	name := azurenames.PrivateLinkName(fe)
	var alias string

	t.Run("created on the frontend, NAT subnet policies disabled, alias on the service", func(t *testing.T) {
		l := l.with(t)
		p := l.waitPLS("PLS created", name, func(p *armnetwork.PrivateLinkService) error {
			if p.Properties.Alias == nil {
				return fmt.Errorf("no alias")
			}
			return nil
		})
		alias = *p.Properties.Alias
		if got := *p.Properties.LoadBalancerFrontendIPConfigurations[0].ID; !strings.HasSuffix(got, "/"+lbCluster+"-internal/frontendIPConfigurations/"+fe) {
			t.Fatalf("PLS frontend %s", got)
		}
		nat := p.Properties.IPConfigurations
		if len(nat) != 1 || !strings.HasSuffix(*nat[0].Properties.Subnet.ID, "/subnets/pls-nat") {
			t.Fatalf("NAT configurations %v", nat)
		}
		owner, _ := azurenames.TagValue(p.Tags, azurenames.TagPLSOwner)
		if cluster, _ := azurenames.ClusterTagValue(p.Tags); owner != "default/pls-web" || cluster != lbCluster {
			t.Fatalf("tags %v", p.Tags)
		}
		sn, err := l.net.NewSubnetsClient().Get(lbCtx(t), l.rg, l.Azure.VnetName, "pls-nat", nil)
		if err != nil || deref(sn.Properties.PrivateLinkServiceNetworkPolicies) != armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled {
			t.Fatalf("NAT subnet policies: %v %v", err, sn.Properties.PrivateLinkServiceNetworkPolicies)
		}
		l.serviceEvent(svc.Name, "PrivateLinkServiceCreated", alias)
		l.waitFor("alias annotation", func(ctx context.Context) (bool, error) {
			s, err := l.Kube.CoreV1().Services(l.ns).Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return s.Annotations[annotations.PLSAlias] == alias, fmt.Errorf("annotation %q", s.Annotations[annotations.PLSAlias])
		}, lbWait)
	})

	t.Run("every annotation applied in place", func(t *testing.T) {
		l := l.with(t)
		l.update(svc.Name, func(s *corev1.Service) {
			s.Annotations[annotations.PLSIPAddressCount] = "2"
			s.Annotations[annotations.PLSIPAddresses] = "10.240.32.200"
			s.Annotations[annotations.PLSFQDNs] = "a.example.com b.example.com"
			s.Annotations[annotations.PLSProxyProtocol] = "true"
			s.Annotations[annotations.PLSVisibility] = "*"
			s.Annotations[annotations.PLSAutoApproval] = plsConsumer
		})
		l.waitPLS("PLS updated in place", name, func(p *armnetwork.PrivateLinkService) error {
			pp := p.Properties
			switch {
			case deref(pp.Alias) != alias:
				return fmt.Errorf("alias changed to %s", deref(pp.Alias))
			case len(pp.IPConfigurations) != 2 || !deref(pp.EnableProxyProtocol) || len(pp.Fqdns) != 2:
				return fmt.Errorf("not updated yet: %d NAT, proxy %v, fqdns %d", len(pp.IPConfigurations), deref(pp.EnableProxyProtocol), len(pp.Fqdns))
			case pp.Visibility == nil || len(pp.Visibility.Subscriptions) != 1 || *pp.Visibility.Subscriptions[0] != "*":
				return fmt.Errorf("visibility %v", pp.Visibility)
			case pp.AutoApproval == nil || len(pp.AutoApproval.Subscriptions) != 1 || *pp.AutoApproval.Subscriptions[0] != plsConsumer:
				return fmt.Errorf("auto-approval %v", pp.AutoApproval)
			}
			for _, c := range pp.IPConfigurations {
				if deref(c.Properties.PrivateIPAddress) == "10.240.32.200" && deref(c.Properties.Primary) {
					return nil
				}
			}
			return fmt.Errorf("static primary NAT address missing")
		})
	})

	t.Run("consumers connect from another subscription and stay connected", func(t *testing.T) {
		l := l.with(t)
		// A manual request from a subscription that only sees the service waits for the
		// provider; a request from an auto-approved subscription is approved at once (Azure
		// applies auto-approval when a request is made, manual or not).
		seed := func(sub, pe string, manual bool) string {
			res, err := l.Azsim.Seed(lbCtx(t), &topology.Topology{SubscriptionID: sub, ResourceGroups: []string{"consumer"},
				VirtualNetworks: []topology.VirtualNetwork{{ResourceGroup: "consumer", Name: "cvnet", AddressPrefixes: []string{"192.168.0.0/16"},
					Subnets: []topology.Subnet{{Name: "pe", AddressPrefix: "192.168.1.0/24"}}}},
				PrivateEndpoints: []topology.PrivateEndpoint{
					{ResourceGroup: "consumer", Name: pe, Subnet: topology.SubnetRef{ResourceGroup: "consumer", VNet: "cvnet", Name: "pe"},
						PrivateLinkService: alias, Manual: manual}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.PrivateEndpoints) != 1 {
				t.Fatalf("seeded endpoints %+v", res.PrivateEndpoints)
			}
			return res.PrivateEndpoints[0].ConnectionState
		}
		states := map[string]string{"pe-auto": seed(plsConsumer, "pe-auto", false), "pe-manual": seed(plsVisibleOnly, "pe-manual", true)}
		if states["pe-manual"] != "Pending" || states["pe-auto"] != "Approved" {
			t.Fatalf("connection states %v", states)
		}
		// The provider approves the pending one.
		p, err := l.net.NewPrivateLinkServicesClient().Get(lbCtx(t), l.rg, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Properties.PrivateEndpointConnections {
			if st := c.Properties.PrivateLinkServiceConnectionState; st != nil && deref(st.Status) == "Pending" {
				if err := l.Azsim.ConnectionAction(lbCtx(t), *c.ID, "approve", "approved by the test"); err != nil {
					t.Fatal(err)
				}
			}
		}
		// An update of the service does not cut them.
		l.update(svc.Name, func(s *corev1.Service) { s.Annotations[annotations.PLSFQDNs] = "a.example.com" })
		l.waitPLS("update with connections kept", name, func(p *armnetwork.PrivateLinkService) error {
			if len(p.Properties.Fqdns) != 1 {
				return fmt.Errorf("fqdns %d", len(p.Properties.Fqdns))
			}
			if got := connectionStates(p); len(got) != 2 || !strings.HasSuffix(got[0], "=Approved") || !strings.HasSuffix(got[1], "=Approved") {
				return fmt.Errorf("connections %v", got)
			}
			return nil
		})
	})

	t.Run("an injected ARM failure is retried", func(t *testing.T) {
		l := l.with(t)
		f, err := l.Azsim.AddFault(lbCtx(t), client.Fault{Kind: "error", Status: 500, Code: "InternalServerError", Class: "write",
			ResourceType: "privateLinkServices", Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		l.update(svc.Name, func(s *corev1.Service) { s.Annotations[annotations.PLSFQDNs] = "c.example.com" })
		l.waitPLS("update after the failures", name, func(p *armnetwork.PrivateLinkService) error {
			if len(p.Properties.Fqdns) != 1 || *p.Properties.Fqdns[0] != "c.example.com" {
				return fmt.Errorf("fqdns %v", strs(p.Properties.Fqdns))
			}
			return nil
		})
		faults, err := l.Azsim.Faults(lbCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range faults {
			if x.ID == f.ID && x.Hits < 1 {
				t.Fatalf("the fault never hit: %+v", x)
			}
		}
	})

	t.Run("a CCM restart in the middle of a change converges", func(t *testing.T) {
		l := l.with(t)
		l.update(svc.Name, func(s *corev1.Service) { s.Annotations[annotations.PLSFQDNs] = "d.example.com e.example.com" })
		l.RestartCCM()
		l.waitPLS("change applied after the restart", name, func(p *armnetwork.PrivateLinkService) error {
			if len(p.Properties.Fqdns) != 2 || deref(p.Properties.Alias) != alias {
				return fmt.Errorf("fqdns %v alias %s", strs(p.Properties.Fqdns), deref(p.Properties.Alias))
			}
			return nil
		})
	})

	t.Run("internal to public without floating IP disabled is refused, nothing deleted", func(t *testing.T) {
		l := l.with(t)
		l.update(svc.Name, func(s *corev1.Service) { delete(s.Annotations, annotations.Internal) })
		t.Cleanup(func() { l.update(svc.Name, func(s *corev1.Service) { setAnnotation(s, annotations.Internal, "true") }) })
		l.serviceEvent(svc.Name, "InvalidAnnotation", annotations.PLSCreate)
		p := l.waitPLS("PLS still there", name, func(*armnetwork.PrivateLinkService) error { return nil })
		if got := connectionStates(p); len(got) != 2 {
			t.Fatalf("connections %v", got)
		}
		if v := view(l.mustState().LBs[lbCluster+"-internal"], fe); len(v.Frontends) != 1 {
			t.Fatal("the internal frontend was removed")
		}
	})

	t.Run("annotation removed: the plan names the connections, then PLS deleted with them, frontend kept", func(t *testing.T) {
		l := l.with(t)
		// As at a take-over of a PLS the existing provider kept after its annotation went: the
		// annotation is removed while no CCM runs, and the plan must say which consumers the
		// deletion cuts off before the CCM starts.
		if err := l.StopCCM(); err != nil {
			t.Fatal(err)
		}
		l.update(svc.Name, func(s *corev1.Service) {
			for k := range s.Annotations {
				if strings.HasPrefix(k, annotations.Prefix+"azure-pls-") {
					delete(s.Annotations, k)
				}
			}
		})
		peID := func(sub, pe string) string {
			return "/subscriptions/" + sub + "/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/" + pe
		}
		wantPEs := map[string]string{peID(plsConsumer, "pe-auto"): "Approved", peID(plsVisibleOnly, "pe-manual"): "Approved"}
		r := l.plan("json")
		var removes []string
		for _, res := range r.plan.Resources {
			if res.Name != name {
				continue
			}
			if res.Action != "delete" {
				t.Errorf("plan: PLS %s action %q, want delete", name, res.Action)
			}
			for _, w := range res.Writes {
				for _, d := range w.Removes {
					removes = append(removes, d.Kind+" "+d.Target+" "+d.State)
				}
			}
		}
		sort.Strings(removes)
		var want []string
		for pe, st := range wantPEs {
			want = append(want, "private endpoint connection "+pe+" "+st)
		}
		sort.Strings(want)
		if strings.Join(removes, "\n") != strings.Join(want, "\n") {
			t.Errorf("plan: the PLS deletion removes\n%s\nwant\n%s", strings.Join(removes, "\n"), strings.Join(want, "\n"))
		}
		text := l.plan("text").out
		for pe, st := range wantPEs {
			if !strings.Contains(text, "(private endpoint "+pe+", "+st+")") {
				t.Errorf("plan text does not name %s (%s):\n%s", pe, st, text)
			}
		}
		if !strings.Contains(text, "2 private endpoint connections removed with them") {
			t.Errorf("plan summary does not count the connections:\n%s", text)
		}
		l.StartCCM()
		l.waitPLSGone("PLS deleted", name)
		l.serviceEvent(svc.Name, "PrivateLinkServiceDeleted", "pe-auto")
		if v := view(l.mustState().LBs[lbCluster+"-internal"], fe); len(v.Frontends) != 1 {
			t.Fatal("the frontend went with the PLS")
		}
	})

	t.Run("service deleted: nothing left", func(t *testing.T) {
		l := l.with(t)
		l.update(svc.Name, func(s *corev1.Service) { setAnnotation(s, annotations.PLSCreate, "true") })
		l.waitPLS("PLS recreated", name, func(*armnetwork.PrivateLinkService) error { return nil })
		l.deleteAndWaitGone(l.get(svc.Name))
		l.waitPLSGone("PLS deleted with the service", name)
		all, err := l.plsList(lbCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || all["users-pls"] == nil {
			t.Fatalf("private link services left: %v", sortedKeys(all))
		}
	})

	p, err := l.net.NewPrivateLinkServicesClient().Get(lbCtx(t), l.rg, "users-pls", nil)
	if err != nil || *p.Etag != usersETag {
		t.Fatalf("the user's private link service was changed: %v", err)
	}
}
