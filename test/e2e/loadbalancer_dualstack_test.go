package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestLoadBalancerDualStack runs IPv6 single-stack and dual-stack services, public and internal,
// against a dual-stack cluster (service range IPv4+IPv6, every node with an IPv4 and an IPv6
// InternalIP) with nodeIP backend pools: each family gets its frontend, public IP, rule, probe,
// pool and NSG rule under the existing provider's names; a port change replaces only the rules,
// probes and NSG rules; deletion leaves nothing. Then admin state: a tainted node is Down in
// both the IPv4 and the IPv6 pool of both load balancers.
func TestLoadBalancerDualStack(t *testing.T) {
	working(t)
	l := dsStart(t)
	for _, c := range []dsCase{
		{name: "public IPv6 single-stack", families: []azurenames.Family{azurenames.IPv6}},
		{name: "public dual-stack", families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}},
		// IPv6 primary: the IPv6 member still carries the -IPv6 suffix, the IPv4 one none.
		{name: "public dual-stack IPv6 first", families: []azurenames.Family{azurenames.IPv6, azurenames.IPv4}},
		// PreferDualStack on a dual-stack cluster gets both families.
		{name: "public prefer dual-stack", families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}, prefer: true},
		// The cluster's default family alone: nothing IPv6 appears.
		{name: "public IPv4 single-stack", families: []azurenames.Family{azurenames.IPv4}},
		{name: "internal IPv6 single-stack", families: []azurenames.Family{azurenames.IPv6}, internal: true},
		{name: "internal dual-stack", families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}, internal: true},
	} {
		t.Run(c.name, func(t *testing.T) { dsTestLifecycle(l.with(t), c) })
	}
	t.Run("internal dual-stack static addresses", func(t *testing.T) { dsTestStaticInternal(l.with(t)) })
	t.Run("source ranges split by family", func(t *testing.T) { dsTestSourceRanges(l.with(t)) })
	t.Run("user IPv6 public IP by name", func(t *testing.T) { dsTestUserPIPv6(l.with(t)) })
	t.Run("load balancers deleted when empty", func(t *testing.T) {
		l := l.with(t)
		l.waitFor("both load balancers deleted", func(ctx context.Context) (bool, error) {
			st, err := l.state(ctx)
			if err != nil {
				return false, err
			}
			if len(st.LBs) > 0 {
				return false, fmt.Errorf("load balancers left: %v", sortedKeys(st.LBs))
			}
			return true, nil
		}, lbWait)
	})
	t.Run("admin state in both pools", func(t *testing.T) { dsTestAdminState(l.with(t)) })
}

// dsStart is lbStart on a dual-stack environment, with the admin-state controller on, and
// checks that the CCM left every node with both InternalIPs.
func dsStart(t *testing.T) *lbEnv {
	t.Helper()
	topo := framework.DualStackTopology()
	topo.ResourceGroups = append(topo.ResourceGroups, "rg-pips") // l.state lists PIPs there too
	e := framework.Start(t, framework.DualStack(framework.Options{Topology: topo, CloudConfig: map[string]any{
		"loadBalancerBackendPoolConfigurationType": "nodeIP",
		"enableLoadBalancerAdminState":             true,
	}}))
	nodesRequireBinary(t, framework.CCMBinaryName)
	for _, m := range e.Machines {
		if len(dsFamilyIPs([]framework.Machine{m}, azurenames.IPv6)) != 1 {
			t.Fatalf("machine %s has no IPv6 address: %v", m.NodeName, m.InternalIPs)
		}
	}
	e.CreateNodes(framework.NodeOptions{ProviderID: true}, e.Machines...)
	e.StartCCM()
	for _, m := range e.Machines {
		e.WaitFor("node "+m.NodeName+" initialized", e.NodeInitialized(m.NodeName), lbWait)
	}
	for _, m := range e.Machines {
		n, err := e.Kube.CoreV1().Nodes().Get(context.Background(), m.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var internal []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if !slices.Equal(internal, m.InternalIPs) {
			t.Fatalf("node %s InternalIPs %v, want %v (IPv4 and IPv6 from the NIC)", m.NodeName, internal, m.InternalIPs)
		}
	}
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	return &lbEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup, ns: "default"}
}

// dsCase is one kind of service: its IP families (one = SingleStack, two = RequireDualStack)
// and whether it is internal.
type dsCase struct {
	name     string
	families []azurenames.Family
	internal bool
	// prefer asks for PreferDualStack (the API server fills in both families).
	prefer bool
}

func (c dsCase) dual() bool { return len(c.families) == 2 }

func (c dsCase) lbName() string { return azurenames.LoadBalancerName(lbCluster, c.internal) }

func (c dsCase) service(name string, port int32) *corev1.Service {
	var ann map[string]string
	if c.internal {
		ann = map[string]string{annotations.Internal: "true"}
	}
	s := lbService(name, ann, lbTCP(port))
	policy := corev1.IPFamilyPolicySingleStack
	if c.dual() {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	if c.prefer {
		policy = corev1.IPFamilyPolicyPreferDualStack
	}
	s.Spec.IPFamilyPolicy = &policy
	if !c.prefer {
		for _, f := range c.families {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPFamily(f))
		}
	}
	return s
}

// dsFamilyIPs are the machines' addresses of one family, sorted.
func dsFamilyIPs(ms []framework.Machine, f azurenames.Family) []string {
	var out []string
	for _, m := range ms {
		for _, ip := range m.InternalIPs {
			if isIPv4(ip) == (f == azurenames.IPv4) {
				out = append(out, ip)
			}
		}
	}
	sort.Strings(out)
	return out
}

// dsIngressByFamily maps each family to the service's ingress address of that family; it fails
// when a family has none or two.
func dsIngressByFamily(t *testing.T, s *corev1.Service, c dsCase) map[azurenames.Family]string {
	t.Helper()
	out := map[azurenames.Family]string{}
	for _, ip := range ingressIPs(s) {
		f := azurenames.IPv6
		if isIPv4(ip) {
			f = azurenames.IPv4
		}
		if out[f] != "" {
			t.Fatalf("ingress %v has two %s addresses", ingressIPs(s), f)
		}
		out[f] = ip
	}
	if len(out) != len(c.families) {
		t.Fatalf("ingress %v, want one address per family %v", ingressIPs(s), c.families)
	}
	for _, f := range c.families {
		if out[f] == "" {
			t.Fatalf("ingress %v has no %s address", ingressIPs(s), f)
		}
	}
	return out
}

// dsNames are the Azure object names the service must have, per family, with the given port.
type dsNames struct {
	frontend, rule, pip, pool, nsgRule string
}

func dsNamesOf(s *corev1.Service, c dsCase, f azurenames.Family, port int32) dsNames {
	svcLB := azurenames.ServiceLBName(s.UID)
	n := dsNames{
		frontend: azurenames.FrontendName(svcLB, "", c.dual(), f),
		rule:     azurenames.RuleName(svcLB, "", corev1.ProtocolTCP, port, c.dual(), f),
		pool:     azurenames.BackendPoolName(lbCluster, f),
	}
	if !c.internal {
		n.pip = azurenames.PublicIPName(lbCluster, svcLB, "", c.dual(), f)
		n.nsgRule = azurenames.AllowRuleName("Tcp", f, []string{annotations.ServiceTagInternet}, []int32{port})
	}
	return n
}

// dsCheck verifies that azsim holds exactly the service's objects for port: per family a
// frontend with the ingress address of that family (a public IP of that version, or a private
// address of that version in the node subnet), a rule and a probe wired to the frontend, the
// family's pool and each other, the pool holding every node's address of that family, and (public
// only) one Internet allow NSG rule to the address.
func (l *lbEnv) dsCheck(s *corev1.Service, c dsCase, port int32) *azState {
	t := l.t
	t.Helper()
	ingress := dsIngressByFamily(t, s, c)
	st := l.mustState()
	lb := st.LBs[c.lbName()]
	if lb == nil {
		t.Fatalf("no load balancer %s; have %v", c.lbName(), sortedKeys(st.LBs))
	}
	if other := st.LBs[azurenames.LoadBalancerName(lbCluster, !c.internal)]; other != nil {
		if o := lbObjectsOf(other, azurenames.ServiceLBName(s.UID)); len(o) > 0 {
			t.Errorf("the other load balancer has %v of the service", o)
		}
	}
	v := view(lb, azurenames.ServiceLBName(s.UID))
	fes, rules, probes := v.names()
	t.Logf("%s: ipFamilies %v clusterIPs %v ingress %v; on %s frontends %v rules %v; pools %s=%v %s=%v",
		s.Name, s.Spec.IPFamilies, s.Spec.ClusterIPs, ingressIPs(s), c.lbName(), fes, rules,
		azurenames.BackendPoolName(lbCluster, azurenames.IPv4), poolIPs(lb, azurenames.BackendPoolName(lbCluster, azurenames.IPv4)),
		azurenames.BackendPoolName(lbCluster, azurenames.IPv6), poolIPs(lb, azurenames.BackendPoolName(lbCluster, azurenames.IPv6)))
	var wantFEs, wantRules []string
	for _, f := range c.families {
		n := dsNamesOf(s, c, f, port)
		wantFEs, wantRules = append(wantFEs, n.frontend), append(wantRules, n.rule)
		ip := ingress[f]
		fe := v.Frontends[n.frontend]
		if fe == nil {
			t.Errorf("%s: no frontend %s; have %v", f, n.frontend, sortedKeys(v.Frontends))
			continue
		}
		if c.internal {
			eq(t, string(f)+" frontend address", deref(fe.Properties.PrivateIPAddress), ip)
			eq(t, string(f)+" frontend address version", string(deref(fe.Properties.PrivateIPAddressVersion)), string(f))
			eq(t, string(f)+" frontend subnet", lastSeg(deref(deref(fe.Properties.Subnet).ID)), l.Azure.SubnetName)
			subnet := netip.MustParsePrefix(framework.DefaultTopology().VirtualNetworks[0].Subnets[0].AddressPrefix)
			if f == azurenames.IPv6 {
				subnet = netip.MustParsePrefix(framework.DualStackSubnetPrefixV6)
			}
			if a, err := netip.ParseAddr(ip); err != nil || !subnet.Contains(a) {
				t.Errorf("%s private address %s not in the node subnet %s", f, ip, subnet)
			}
		} else {
			pip := st.PIPs[l.rg+"/"+n.pip]
			if pip == nil {
				t.Errorf("%s: no public IP %s; have %v", f, n.pip, sortedKeys(st.PIPs))
			} else {
				eq(t, string(f)+" PIP address", pipAddress(pip), ip)
				eq(t, string(f)+" PIP version", string(deref(pip.Properties.PublicIPAddressVersion)), string(f))
				eq(t, string(f)+" frontend PIP", strings.ToLower(deref(deref(fe.Properties.PublicIPAddress).ID)), strings.ToLower(deref(pip.ID)))
				svcTag, _ := azurenames.ServiceTagValue(pip.Tags)
				eq(t, string(f)+" PIP service tag", svcTag, azurenames.ServiceKey(s.Namespace, s.Name))
			}
			eqs(t, string(f)+" NSG rules to "+ip, nsgRulesTo(st.NSG, ip), []string{n.nsgRule})
			if r := nsgRule(st.NSG, n.nsgRule); r != nil {
				eqs(t, string(f)+" NSG sources", ruleSources(r), []string{annotations.ServiceTagInternet})
				eqs(t, string(f)+" NSG ports", rulePorts(r), []string{fmt.Sprint(port)})
				eqs(t, string(f)+" NSG destinations", ruleDestinations(r), []string{ip})
			}
		}
		if r := v.Rules[n.rule]; r == nil {
			t.Errorf("%s: no rule %s; have %v", f, n.rule, sortedKeys(v.Rules))
		} else {
			p := r.Properties
			eq(t, n.rule+" frontend", lastSeg(deref(deref(p.FrontendIPConfiguration).ID)), n.frontend)
			eq(t, n.rule+" pool", lastSeg(deref(deref(p.BackendAddressPool).ID)), n.pool)
			eq(t, n.rule+" probe", lastSeg(deref(deref(p.Probe).ID)), n.rule)
			eq(t, n.rule+" frontend port", deref(p.FrontendPort), port)
			eq(t, n.rule+" protocol", deref(p.Protocol), armnetwork.TransportProtocolTCP)
		}
		if p := v.Probes[n.rule]; p != nil {
			eq(t, n.rule+" probe port", deref(p.Properties.Port), s.Spec.Ports[0].NodePort)
		}
		eqs(t, n.pool+" members", poolIPs(lb, n.pool), dsFamilyIPs(l.Machines, f))
	}
	sort.Strings(wantFEs)
	sort.Strings(wantRules)
	eqs(t, "frontends", fes, wantFEs)
	eqs(t, "rules", rules, wantRules)
	eqs(t, "probes", probes, wantRules)
	var pips []string
	for k := range st.PIPs {
		if strings.Contains(k, azurenames.ServiceLBName(s.UID)) {
			pips = append(pips, k)
		}
	}
	if c.internal && len(pips) > 0 {
		t.Errorf("internal service has public IPs %v", pips)
	} else if !c.internal && len(pips) != len(c.families) {
		t.Errorf("public IPs %v, want one per family", pips)
	}
	if c.internal {
		for _, ip := range ingress {
			eqs(t, "NSG rules to "+ip+" (internal: none by default)", nsgRulesTo(st.NSG, ip), nil)
		}
	}
	return st
}

// dsTestLifecycle: create (exact objects per family), change the port (only rules, probes and
// NSG rules change; frontends, public IPs and pools are not written), delete (nothing left).
func dsTestLifecycle(l *lbEnv, c dsCase) {
	t := l.t
	name := "ds-" + strings.NewReplacer(" ", "-", "IPv6", "v6").Replace(strings.ToLower(c.name))
	l.create(c.service(name, 80))
	s := l.waitIP(name)
	before := l.dsCheck(s, c, 80)
	if t.Failed() {
		t.FailNow()
	}

	statsBefore := l.stats()
	l.update(name, func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{lbTCP(8080)} })
	l.waitFor("rules moved to port 8080 in every family", func(ctx context.Context) (bool, error) {
		s, err := l.Kube.CoreV1().Services(l.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		v := view(st.LBs[c.lbName()], azurenames.ServiceLBName(s.UID))
		for _, f := range c.families {
			n, old := dsNamesOf(s, c, f, 8080), dsNamesOf(s, c, f, 80)
			if v.Rules[n.rule] == nil || v.Rules[old.rule] != nil || v.Probes[old.rule] != nil {
				return false, fmt.Errorf("rules %v probes %v", sortedKeys(v.Rules), sortedKeys(v.Probes))
			}
			if n.nsgRule != "" && (nsgRule(st.NSG, n.nsgRule) == nil || nsgRule(st.NSG, old.nsgRule) != nil) {
				return false, fmt.Errorf("NSG rule %s not yet replaced by %s", old.nsgRule, n.nsgRule)
			}
		}
		return true, nil
	}, lbWait)
	s = l.get(name)
	after := l.dsCheck(s, c, 8080)
	statsAfter := l.stats()
	svcLB := azurenames.ServiceLBName(s.UID)
	v0, v1 := view(before.LBs[c.lbName()], svcLB), view(after.LBs[c.lbName()], svcLB)
	for _, f := range c.families {
		n := dsNamesOf(s, c, f, 80)
		eq(t, n.frontend+" unchanged", canon(t, v1.Frontends[n.frontend], "loadBalancingRules"),
			canon(t, v0.Frontends[n.frontend], "loadBalancingRules"))
		if n.pip != "" {
			eq(t, n.pip+" etag unchanged", deref(after.PIPs[l.rg+"/"+n.pip].Etag), deref(before.PIPs[l.rg+"/"+n.pip].Etag))
		}
	}
	eq(t, "PIP writes for a port change", statsAfter.Writes("publicIPAddresses")-statsBefore.Writes("publicIPAddresses"), int64(0))
	eq(t, "pool writes for a port change", statsAfter.Writes("backendAddressPools")-statsBefore.Writes("backendAddressPools"), int64(0))
	if n := statsAfter.Writes("loadBalancers") - statsBefore.Writes("loadBalancers"); n < 1 || n > 2 {
		t.Errorf("LB writes for a port change = %d, want 1 (2 if a resync raced)", n)
	}
	if c.internal {
		eq(t, "NSG writes for an internal service's port change", statsAfter.Writes("networkSecurityGroups")-statsBefore.Writes("networkSecurityGroups"), int64(0))
	}
	l.deleteAndWaitGone(s)
}

// dsPoolStates reads a pool of a load balancer: address -> admin state ("" when unset).
func (l *lbEnv) dsPoolStates(ctx context.Context, lb, pool string) (map[string]string, error) {
	p, err := l.net.NewLoadBalancerBackendAddressPoolsClient().Get(ctx, l.rg, lb, pool, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if p.Properties == nil {
		return out, nil
	}
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		if a.Properties != nil && a.Properties.IPAddress != nil {
			out[*a.Properties.IPAddress] = string(deref(a.Properties.AdminState))
		}
	}
	return out, nil
}

// dsAdminStateIs holds when both pools of both load balancers hold exactly the nodes' addresses
// of their family, the addresses of the nodes in down Down and every other one not Down.
func (l *lbEnv) dsAdminStateIs(down ...string) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		for _, lb := range []string{azurenames.LoadBalancerName(lbCluster, false), azurenames.LoadBalancerName(lbCluster, true)} {
			for _, f := range []azurenames.Family{azurenames.IPv4, azurenames.IPv6} {
				pool := azurenames.BackendPoolName(lbCluster, f)
				got, err := l.dsPoolStates(ctx, lb, pool)
				if err != nil {
					return false, err
				}
				if want := dsFamilyIPs(l.Machines, f); !slices.Equal(sortedKeys(got), want) {
					return false, fmt.Errorf("%s/%s holds %v, want %v", lb, pool, got, want)
				}
				for _, m := range l.Machines {
					ip := dsFamilyIPs([]framework.Machine{m}, f)[0]
					if (got[ip] == "Down") != slices.Contains(down, m.NodeName) {
						return false, fmt.Errorf("%s/%s %v; want Down only for %v", lb, pool, got, down)
					}
				}
			}
		}
		return true, nil
	}
}

// dsTestAdminState: with a public and an internal dual-stack service, an out-of-service taint
// makes the node's IPv4 and IPv6 entries Down in every pool of both load balancers, one write
// per pool, while the others stay None; removing it restores None.
func dsTestAdminState(l *lbEnv) {
	t := l.t
	c := dsCase{families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}}
	ci := dsCase{families: c.families, internal: true}
	l.create(c.service("ds-admin", 80))
	l.create(ci.service("ds-admin-internal", 80))
	pub, internal := l.waitIP("ds-admin"), l.waitIP("ds-admin-internal")
	l.waitFor("four pools hold every node, none Down", l.dsAdminStateIs(), lbWait)

	n0 := l.Machines[0].NodeName
	before := l.stats().Writes("backendAddressPools")
	adminStateShutDown(t, l.Env, n0)
	l.waitFor(n0+" Down in the IPv4 and IPv6 pools", l.dsAdminStateIs(n0), lbWait)
	if got := l.stats().Writes("backendAddressPools") - before; got != 4 {
		t.Errorf("%d pool writes for one tainted node, want one per pool (4: IPv4 and IPv6 on two load balancers)", got)
	}
	l.waitFor("AdminStateDown event", adminStateNodeEvent(l.Env, n0, "AdminStateDown"), lbWait)

	// A service update while draining must not flip the node back (its reconcile keeps Down).
	l.update("ds-admin", func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, lbTCP(443)) })
	l.waitFor("IPv6 rule for 443", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		r := azurenames.RuleName(azurenames.ServiceLBName(pub.UID), "", corev1.ProtocolTCP, 443, true, azurenames.IPv6)
		return view(st.LBs[lbCluster], azurenames.ServiceLBName(pub.UID)).Rules[r] != nil, fmt.Errorf("no rule %s yet", r)
	}, lbWait)
	if ok, err := l.dsAdminStateIs(n0)(lbCtx(t)); !ok {
		t.Errorf("after a service update while draining: %v", err)
	}

	adminStateBackInService(t, l.Env, n0)
	l.waitFor(n0+" restored in every pool", l.dsAdminStateIs(), lbWait)
	l.deleteAndWaitGone(l.get(pub.Name))
	l.deleteAndWaitGone(internal)
}

// dsTestStaticInternal: the ipv4 and ipv6 annotations give a dual-stack internal service static
// frontends with those addresses.
func dsTestStaticInternal(l *lbEnv) {
	t := l.t
	c := dsCase{families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}, internal: true}
	want := map[azurenames.Family]string{azurenames.IPv4: "10.240.0.200", azurenames.IPv6: "fd00:db8:deca::200"}
	svc := c.service("ds-static", 80)
	svc.Annotations[annotations.IPv4], svc.Annotations[annotations.IPv6] = want[azurenames.IPv4], want[azurenames.IPv6]
	l.create(svc)
	s := l.waitIP(svc.Name)
	st := l.dsCheck(s, c, 80)
	eq(t, "ingress IPv4", dsIngressByFamily(t, s, c)[azurenames.IPv4], want[azurenames.IPv4])
	eq(t, "ingress IPv6", dsIngressByFamily(t, s, c)[azurenames.IPv6], want[azurenames.IPv6])
	v := view(st.LBs[c.lbName()], azurenames.ServiceLBName(s.UID))
	for _, f := range c.families {
		if fe := v.Frontends[dsNamesOf(s, c, f, 80).frontend]; fe != nil {
			eq(t, string(f)+" allocation", deref(fe.Properties.PrivateIPAllocationMethod), armnetwork.IPAllocationMethodStatic)
			eq(t, string(f)+" address", deref(fe.Properties.PrivateIPAddress), want[f])
		}
	}
	l.deleteAndWaitGone(s)
}

// dsTestSourceRanges: spec.loadBalancerSourceRanges with an IPv4 and an IPv6 range: the IPv4
// address is opened to the IPv4 range only and the IPv6 address to the IPv6 range only (NSG
// rules cannot mix families), and nothing is opened to the Internet.
func dsTestSourceRanges(l *lbEnv) {
	t := l.t
	c := dsCase{families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}}
	svc := c.service("ds-ranges", 80)
	ranges := map[azurenames.Family]string{azurenames.IPv4: "10.1.0.0/16", azurenames.IPv6: "2001:db8:1::/48"}
	svc.Spec.LoadBalancerSourceRanges = []string{ranges[azurenames.IPv4], ranges[azurenames.IPv6]}
	l.create(svc)
	s := l.waitIP(svc.Name)
	ingress := dsIngressByFamily(t, s, c)
	st := l.mustState()
	for _, f := range c.families {
		name := azurenames.AllowRuleName("Tcp", f, []string{ranges[f]}, []int32{80})
		eqs(t, string(f)+" NSG rules to "+ingress[f], nsgRulesTo(st.NSG, ingress[f]), []string{name})
		if r := nsgRule(st.NSG, name); r != nil {
			eqs(t, string(f)+" NSG sources", ruleSources(r), []string{ranges[f]})
			eqs(t, string(f)+" NSG destinations", ruleDestinations(r), []string{ingress[f]})
		}
	}
	l.deleteAndWaitGone(s)
}

// dsTestUserPIPv6: a dual-stack service naming a user's IPv6 public IP (azure-pip-name-ipv6) puts
// it on the IPv6 frontend and creates only the IPv4 public IP; deletion removes that one and
// leaves the user's IPv6 public IP with its address.
func dsTestUserPIPv6(l *lbEnv) {
	t := l.t
	ctx := lbCtx(t)
	poller, err := l.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, l.rg, "user-pip-v6", armnetwork.PublicIPAddress{
		Location: to.Ptr(l.Azure.Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv6),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := poller.PollUntilDone(ctx, lbPoll)
	if err != nil {
		t.Fatal(err)
	}
	user := res.PublicIPAddress
	c := dsCase{families: []azurenames.Family{azurenames.IPv4, azurenames.IPv6}}
	svc := c.service("ds-user-pip", 80)
	svc.Annotations = map[string]string{annotations.PIPNameIPv6: "user-pip-v6"}
	l.create(svc)
	s := l.waitIP(svc.Name)
	ingress := dsIngressByFamily(t, s, c)
	eq(t, "IPv6 ingress", ingress[azurenames.IPv6], pipAddress(&user))
	st := l.mustState()
	v := view(st.LBs[lbCluster], azurenames.ServiceLBName(s.UID))
	v4, v6 := dsNamesOf(s, c, azurenames.IPv4, 80), dsNamesOf(s, c, azurenames.IPv6, 80)
	if fe := v.Frontends[v6.frontend]; fe == nil {
		t.Errorf("no frontend %s; have %v", v6.frontend, sortedKeys(v.Frontends))
	} else {
		eq(t, "IPv6 frontend PIP", strings.ToLower(deref(deref(fe.Properties.PublicIPAddress).ID)), strings.ToLower(deref(user.ID)))
	}
	if st.PIPs[l.rg+"/"+v6.pip] != nil {
		t.Errorf("managed IPv6 public IP %s created although the service names its own", v6.pip)
	}
	if p := st.PIPs[l.rg+"/"+v4.pip]; p == nil || pipAddress(p) != ingress[azurenames.IPv4] {
		t.Errorf("managed IPv4 public IP %s = %v, want address %s", v4.pip, p, ingress[azurenames.IPv4])
	}
	l.deleteAndWaitGone(s)
	if p := l.pipExists(l.rg, "user-pip-v6"); p != nil {
		eq(t, "user IPv6 public IP address kept", pipAddress(p), pipAddress(&user))
	}
	del, err := l.net.NewPublicIPAddressesClient().BeginDelete(ctx, l.rg, "user-pip-v6", nil)
	if err == nil {
		_, err = del.PollUntilDone(ctx, lbPoll)
	}
	if err != nil {
		t.Errorf("delete user-pip-v6: %v", err)
	}
}
