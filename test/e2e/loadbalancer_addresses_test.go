package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestLoadBalancerAddresses covers where a service's IP comes from: user public IPs by name and
// by address (never deleted), a public IP prefix, a DNS label, the PIP resource-group annotation,
// services sharing one IP, and internal frontends (dynamic, static in another subnet, HA ports),
// zone-redundant in the zonal region.
func TestLoadBalancerAddresses(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig})
	t.Run("user public IP by name and by address", func(t *testing.T) { lbTestUserPIP(l.with(t)) })
	t.Run("managed public IP options", func(t *testing.T) { lbTestManagedPIPOptions(l.with(t)) })
	t.Run("services sharing one IP", func(t *testing.T) { lbTestSharedIP(l.with(t)) })
	t.Run("internal", func(t *testing.T) { lbTestInternal(l.with(t)) })
}

var lbPoll = &runtime.PollUntilDoneOptions{Frequency: 100 * time.Millisecond}

// userPIP creates a Standard static public IP as a user would, outside the CCM.
func (l *lbEnv) userPIP(rg, name string) *armnetwork.PublicIPAddress {
	l.t.Helper()
	ctx := lbCtx(l.t)
	poller, err := l.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, rg, name, armnetwork.PublicIPAddress{
		Location: to.Ptr(l.Azure.Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
	}, nil)
	if err != nil {
		l.t.Fatalf("create public IP %s: %v", name, err)
	}
	res, err := poller.PollUntilDone(ctx, lbPoll)
	if err != nil {
		l.t.Fatalf("create public IP %s: %v", name, err)
	}
	return &res.PublicIPAddress
}

func (l *lbEnv) pipExists(rg, name string) *armnetwork.PublicIPAddress {
	l.t.Helper()
	res, err := l.net.NewPublicIPAddressesClient().Get(lbCtx(l.t), rg, name, nil)
	if err != nil {
		l.t.Errorf("public IP %s/%s: %v", rg, name, err)
		return nil
	}
	return &res.PublicIPAddress
}

// lbTestUserPIP: a service on a user's public IP (by name, by address) uses it as its frontend,
// creates no PIP of its own, and leaves the user's PIP in place when deleted.
func lbTestUserPIP(l *lbEnv) {
	t := l.t
	byName := l.userPIP(l.rg, "user-pip-name")
	byIP := l.userPIP(l.rg, "user-pip-ip")
	cases := []struct {
		svc *corev1.Service
		pip *armnetwork.PublicIPAddress
	}{
		{lbService("by-name", map[string]string{annotations.PIPName: "user-pip-name"}), byName},
		{lbService("by-ip", map[string]string{annotations.IPv4: pipAddress(byIP)}), byIP},
	}
	before := len(l.mustState().PIPs)
	for _, c := range cases {
		l.create(c.svc)
	}
	for i, c := range cases {
		s := l.waitIP(c.svc.Name)
		cases[i].svc = s
		eqs(t, c.svc.Name+" ingress", ingressIPs(s), []string{pipAddress(c.pip)})
		v := view(l.mustState().LBs[lbCluster], azurenames.ServiceLBName(s.UID))
		fe := v.Frontends[azurenames.ServiceLBName(s.UID)]
		if fe == nil {
			t.Fatalf("%s: no frontend", c.svc.Name)
		}
		eq(t, c.svc.Name+" frontend PIP", strings.ToLower(deref(fe.Properties.PublicIPAddress.ID)), strings.ToLower(*c.pip.ID))
	}
	eq(t, "public IPs created by the CCM", len(l.mustState().PIPs)-before, 0)
	for _, c := range cases {
		l.deleteAndWaitGone(c.svc)
		if p := l.pipExists(l.rg, *c.pip.Name); p != nil {
			eq(t, *c.pip.Name+" address kept", pipAddress(p), pipAddress(c.pip))
		}
	}
}

// lbTestManagedPIPOptions: prefix, DNS label, resource group, extra tags of managed PIPs.
func lbTestManagedPIPOptions(l *lbEnv) {
	t := l.t
	ctx := lbCtx(t)
	poller, err := l.net.NewPublicIPPrefixesClient().BeginCreateOrUpdate(ctx, l.rg, "prefix1", armnetwork.PublicIPPrefix{
		Location: to.Ptr(l.Azure.Location),
		SKU:      &armnetwork.PublicIPPrefixSKU{Name: to.Ptr(armnetwork.PublicIPPrefixSKUNameStandard)},
		Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PrefixLength: to.Ptr[int32](28),
			PublicIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4)},
	}, nil)
	if err != nil {
		t.Fatalf("create prefix: %v", err)
	}
	prefix, err := poller.PollUntilDone(ctx, lbPoll)
	if err != nil {
		t.Fatalf("create prefix: %v", err)
	}
	prefixID := *prefix.ID

	type pipCase struct {
		svc   *corev1.Service
		rg    string
		check func(t *testing.T, p *armnetwork.PublicIPAddress)
	}
	cases := []pipCase{
		{svc: lbService("prefix", map[string]string{annotations.PIPPrefixID: prefixID}), rg: l.rg,
			check: func(t *testing.T, p *armnetwork.PublicIPAddress) {
				eq(t, "PIP prefix", strings.ToLower(deref(deref(p.Properties.PublicIPPrefix).ID)), strings.ToLower(prefixID))
				if pfx, err := netip.ParsePrefix(deref(prefix.Properties.IPPrefix)); err == nil {
					if a, err := netip.ParseAddr(pipAddress(p)); err != nil || !pfx.Contains(a) {
						t.Errorf("PIP address %s is not in prefix %s", pipAddress(p), pfx)
					}
				}
			}},
		{svc: lbService("dns", map[string]string{annotations.DNSLabelName: "my-app-e2e"}), rg: l.rg,
			check: func(t *testing.T, p *armnetwork.PublicIPAddress) {
				eq(t, "DNS label", deref(deref(p.Properties.DNSSettings).DomainNameLabel), "my-app-e2e")
				owner, _ := azurenames.DNSLabelServiceTagValue(p.Tags)
				eq(t, "DNS label owner tag", owner, "default/dns")
			}},
		{svc: lbService("other-rg", map[string]string{annotations.ResourceGroup: "rg-pips",
			annotations.PIPTags: "team=e2e,cost=lb"}), rg: "rg-pips",
			check: func(t *testing.T, p *armnetwork.PublicIPAddress) {
				eq(t, "tag team", deref(p.Tags["team"]), "e2e")
				eq(t, "tag cost", deref(p.Tags["cost"]), "lb")
			}},
	}
	for _, c := range cases {
		l.create(c.svc)
	}
	for i, c := range cases {
		s := l.waitIP(c.svc.Name)
		cases[i].svc = s
		svcLB := azurenames.ServiceLBName(s.UID)
		prefixArg := ""
		if c.svc.Name == "prefix" {
			prefixArg = prefixID
		}
		name := azurenames.PublicIPName(lbCluster, svcLB, prefixArg, false, azurenames.IPv4)
		st := l.mustState()
		p := st.PIPs[c.rg+"/"+name]
		t.Run(c.svc.Name, func(t *testing.T) {
			if p == nil {
				t.Fatalf("no public IP %s/%s; have %v", c.rg, name, sortedKeys(st.PIPs))
			}
			eqs(t, "ingress", ingressIPs(s), []string{pipAddress(p)})
			eqs(t, "zones", strs(p.Zones), []string{"1", "2", "3"})
			c.check(t, p)
		})
	}
	// Removing the DNS label annotation's value removes the label the service set.
	dns := cases[1].svc
	l.update("dns", func(s *corev1.Service) { s.Annotations[annotations.DNSLabelName] = "" })
	pipName := l.rg + "/" + azurenames.PublicIPName(lbCluster, azurenames.ServiceLBName(dns.UID), "", false, azurenames.IPv4)
	l.waitFor("DNS label removed", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		p := st.PIPs[pipName]
		if p == nil {
			return false, fmt.Errorf("no PIP %s", pipName)
		}
		if label := deref(deref(p.Properties.DNSSettings).DomainNameLabel); label != "" {
			return false, fmt.Errorf("label still %q", label)
		}
		return true, nil
	}, lbWait)
	for _, c := range cases {
		l.deleteAndWaitGone(l.get(c.svc.Name))
	}
}

// lbTestSharedIP: two services on one user PIP share one frontend, each with its own rules;
// deleting one keeps the other's rules and NSG rule; deleting both leaves the PIP.
func lbTestSharedIP(l *lbEnv) {
	t := l.t
	pip := l.userPIP(l.rg, "shared-pip")
	ann := map[string]string{annotations.PIPName: "shared-pip"}
	a := l.create(lbService("share-a", ann, lbTCP(80)))
	l.waitIP(a.Name)
	b := l.create(lbService("share-b", ann, lbTCP(8080)))
	l.waitIP(b.Name)
	ip := pipAddress(pip)
	st := l.mustState()
	lb := st.LBs[lbCluster]
	var onPIP []string
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		if fe.Properties.PublicIPAddress != nil && strings.EqualFold(*fe.Properties.PublicIPAddress.ID, *pip.ID) {
			onPIP = append(onPIP, *fe.Name)
		}
	}
	eqs(t, "frontends on the shared PIP", onPIP, []string{azurenames.ServiceLBName(a.UID)})
	ruleA := azurenames.RuleName(azurenames.ServiceLBName(a.UID), "", corev1.ProtocolTCP, 80, false, azurenames.IPv4)
	ruleB := azurenames.RuleName(azurenames.ServiceLBName(b.UID), "", corev1.ProtocolTCP, 8080, false, azurenames.IPv4)
	vb := view(lb, azurenames.ServiceLBName(b.UID))
	if r := vb.Rules[ruleB]; r == nil {
		t.Fatalf("no rule %s", ruleB)
	} else {
		eq(t, "B's rule frontend", lastSeg(*r.Properties.FrontendIPConfiguration.ID), azurenames.ServiceLBName(a.UID))
	}
	nsgB := azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"Internet"}, []int32{8080})
	wantNSG := sortStrings(azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"Internet"}, []int32{80}), nsgB)
	eqs(t, "NSG rules to the shared IP", nsgRulesTo(st.NSG, ip), wantNSG)

	// Delete A (whose name the frontend carries): B keeps frontend, rule, probe and NSG rule.
	if err := l.Kube.CoreV1().Services(l.ns).Delete(lbCtx(t), a.Name, deleteOpts); err != nil {
		t.Fatal(err)
	}
	l.waitFor("A's rules gone, B's intact", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		lb := st.LBs[lbCluster]
		va, vb := view(lb, azurenames.ServiceLBName(a.UID)), view(lb, azurenames.ServiceLBName(b.UID))
		switch {
		case va.Rules[ruleA] != nil || len(va.Probes) > 0:
			return false, fmt.Errorf("A still has rules %v probes %v", sortedKeys(va.Rules), sortedKeys(va.Probes))
		case vb.Rules[ruleB] == nil || len(vb.Probes) != 1:
			return false, fmt.Errorf("B lost its rule or probe: %v %v", sortedKeys(vb.Rules), sortedKeys(vb.Probes))
		case !slices.Equal(nsgRulesTo(st.NSG, ip), []string{nsgB}):
			return false, fmt.Errorf("NSG rules to %s: %v", ip, nsgRulesTo(st.NSG, ip))
		}
		return true, nil
	}, lbWait)
	l.waitFor("B still has its IP", l.ServiceIngress(l.ns, b.Name), 10*time.Second)
	l.deleteAndWaitGone(l.get(b.Name))
	st = l.mustState()
	if lb := st.LBs[lbCluster]; lb != nil {
		if o := lbObjectsOf(lb, azurenames.ServiceLBName(a.UID)); len(o) > 0 {
			t.Errorf("A's objects left after both services are gone: %v", o)
		}
	}
	if p := l.pipExists(l.rg, "shared-pip"); p != nil {
		eq(t, "shared PIP kept", pipAddress(p), ip)
	}
}

// lbTestInternal: internal frontends on <cluster>-internal: dynamic in the node subnet,
// static in the subnet of the annotation (names carry the subnet), HA ports; all zone-redundant.
func lbTestInternal(l *lbEnv) {
	t := l.t
	internal := map[string]string{annotations.Internal: "true"}
	dyn := l.create(lbService("ilb-dynamic", internal))
	static := l.create(lbService("ilb-static", map[string]string{annotations.Internal: "true",
		annotations.InternalSubnet: "ilb", annotations.IPv4: "10.240.16.10"}))
	ha := l.create(lbService("ilb-ha", map[string]string{annotations.Internal: "true", annotations.HAPorts: "true"},
		lbTCP(80), lbTCP(443)))
	for _, s := range []*corev1.Service{dyn, static, ha} {
		l.waitIP(s.Name)
	}
	dyn, static, ha = l.get(dyn.Name), l.get(static.Name), l.get(ha.Name)
	st := l.mustState()
	ilb := st.LBs[azurenames.LoadBalancerName(lbCluster, true)]
	if ilb == nil {
		t.Fatalf("no internal LB %s; have %v", azurenames.LoadBalancerName(lbCluster, true), sortedKeys(st.LBs))
	}
	if pub := st.LBs[lbCluster]; pub != nil {
		t.Errorf("the public LB exists with only internal services: %v", lbObjectsOf(pub, "a"))
	}
	subnetOf := func(fe *armnetwork.FrontendIPConfiguration) string {
		return lastSeg(deref(deref(fe.Properties.Subnet).ID))
	}
	t.Run("dynamic", func(t *testing.T) {
		svcLB := azurenames.ServiceLBName(dyn.UID)
		v := view(ilb, svcLB)
		fe := v.Frontends[svcLB]
		if fe == nil {
			t.Fatalf("no frontend %s: %v", svcLB, sortedKeys(v.Frontends))
		}
		eq(t, "subnet", subnetOf(fe), l.Azure.SubnetName)
		eqs(t, "ingress", ingressIPs(dyn), []string{deref(fe.Properties.PrivateIPAddress)})
		eq(t, "allocation", deref(fe.Properties.PrivateIPAllocationMethod), armnetwork.IPAllocationMethodDynamic)
		eqs(t, "zones", strs(fe.Zones), []string{"1", "2", "3"})
		if a, err := netip.ParseAddr(ingressIPs(dyn)[0]); err != nil || !netip.MustParsePrefix("10.240.0.0/20").Contains(a) {
			t.Errorf("private IP %v not in the node subnet", ingressIPs(dyn))
		}
		eqs(t, "NSG rules (internal: none by default)", nsgRulesTo(st.NSG, ingressIPs(dyn)[0]), nil)
		eqs(t, "pool", poolIPs(ilb, lbCluster), l.nodeIPs())
	})
	t.Run("static in another subnet", func(t *testing.T) {
		svcLB := azurenames.ServiceLBName(static.UID)
		v := view(ilb, svcLB)
		feName := azurenames.FrontendName(svcLB, "ilb", false, azurenames.IPv4)
		fe := v.Frontends[feName]
		if fe == nil {
			t.Fatalf("no frontend %s: %v", feName, sortedKeys(v.Frontends))
		}
		eq(t, "subnet", subnetOf(fe), "ilb")
		eq(t, "private IP", deref(fe.Properties.PrivateIPAddress), "10.240.16.10")
		eq(t, "allocation", deref(fe.Properties.PrivateIPAllocationMethod), armnetwork.IPAllocationMethodStatic)
		eqs(t, "ingress", ingressIPs(static), []string{"10.240.16.10"})
		_, rules, _ := v.names()
		eqs(t, "rules", rules, []string{azurenames.RuleName(svcLB, "ilb", corev1.ProtocolTCP, 80, false, azurenames.IPv4)})
	})
	t.Run("HA ports", func(t *testing.T) {
		svcLB := azurenames.ServiceLBName(ha.UID)
		v := view(ilb, svcLB)
		name := azurenames.HAPortsRuleName(svcLB, "", ha.Spec.Ports, false, azurenames.IPv4)
		_, rules, _ := v.names()
		eqs(t, "rules", rules, []string{name})
		if r := v.Rules[name]; r != nil {
			eq(t, "protocol", deref(r.Properties.Protocol), armnetwork.TransportProtocolAll)
			eq(t, "frontend port", deref(r.Properties.FrontendPort), int32(0))
			eq(t, "backend port", deref(r.Properties.BackendPort), int32(0))
		}
	})
	for _, s := range []*corev1.Service{dyn, static, ha} {
		l.deleteAndWaitGone(s)
	}
	l.waitFor("internal LB deleted when empty", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		ilb := azurenames.LoadBalancerName(lbCluster, true)
		return st.LBs[ilb] == nil, fmt.Errorf("%s still exists", ilb)
	}, lbWait)
}
