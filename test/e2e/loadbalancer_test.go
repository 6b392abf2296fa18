package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// TestLoadBalancerPublic runs the public-LB groups of the load balancer feature against one
// environment (nodeIP backend pools): lifecycle and minimal updates, rule and probe options,
// NSG sources. Every subtest deletes what it created and checks azsim is clean again.
func TestLoadBalancerPublic(t *testing.T) {
	working(t)
	l := lbStart(t, lbOptions{CloudConfig: lbNodeIPConfig})
	t.Run("lifecycle", func(t *testing.T) { lbTestLifecycle(l.with(t)) })
	t.Run("rule and probe options", func(t *testing.T) { lbTestRuleOptions(l.with(t)) })
	t.Run("nsg sources", func(t *testing.T) { lbTestNSGSources(l.with(t)) })
	t.Run("the existing provider's metric families", func(t *testing.T) { lbTestCompatMetrics(l.with(t)) })
	t.Run("load balancer deleted when empty", func(t *testing.T) {
		l := l.with(t)
		l.waitFor("public LB deleted", func(ctx context.Context) (bool, error) {
			st, err := l.state(ctx)
			if err != nil {
				return false, err
			}
			if lb := st.LBs[lbCluster]; lb != nil {
				return false, fmt.Errorf("LB %s still exists with %d frontends", lbCluster, len(lb.Properties.FrontendIPConfigurations))
			}
			return true, nil
		}, lbWait)
	})
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func eqs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// lbTestLifecycle: a public service gets a managed zone-redundant PIP, one frontend, a rule and a
// probe per port, the nodes in the pool and an Internet allow rule; adding a port adds one rule
// and one probe and changes nothing else; deleting it leaves nothing.
func lbTestLifecycle(l *lbEnv) {
	t := l.t
	s := l.create(lbService("lifecycle", nil, lbTCP(80)))
	s = l.waitIP(s.Name)
	ip := ingressIPs(s)[0]
	svcLB := azurenames.ServiceLBName(s.UID)
	st := l.mustState()
	lb := st.LBs[lbCluster]
	if lb == nil {
		t.Fatalf("no load balancer %s in azsim", lbCluster)
	}
	rule80 := azurenames.RuleName(svcLB, "", corev1.ProtocolTCP, 80, false, azurenames.IPv4)
	v := view(lb, svcLB)
	fes, rules, probes := v.names()
	eqs(t, "frontends", fes, []string{svcLB})
	eqs(t, "rules", rules, []string{rule80})
	eqs(t, "probes", probes, []string{rule80})

	pipName := azurenames.PublicIPName(lbCluster, svcLB, "", false, azurenames.IPv4)
	pip := st.PIPs[l.rg+"/"+pipName]
	if pip == nil {
		t.Fatalf("no public IP %s; have %v", pipName, sortedKeys(st.PIPs))
	}
	eq(t, "PIP address", pipAddress(pip), ip)
	eqs(t, "PIP zones (zone-redundant in a zonal region)", strs(pip.Zones), []string{"1", "2", "3"})
	eq(t, "PIP SKU", deref(deref(pip.SKU).Name), armnetwork.PublicIPAddressSKUNameStandard)
	eq(t, "PIP allocation", deref(pip.Properties.PublicIPAllocationMethod), armnetwork.IPAllocationMethodStatic)
	svcTag, _ := azurenames.ServiceTagValue(pip.Tags)
	clusterTag, _ := azurenames.ClusterTagValue(pip.Tags)
	eq(t, "PIP service tag", svcTag, "default/lifecycle")
	eq(t, "PIP cluster tag", clusterTag, lbCluster)
	fe := v.Frontends[svcLB]
	eq(t, "frontend PIP", strings.ToLower(deref(deref(fe.Properties.PublicIPAddress).ID)), strings.ToLower(deref(pip.ID)))

	r := v.Rules[rule80].Properties
	eq(t, "rule protocol", deref(r.Protocol), armnetwork.TransportProtocolTCP)
	eq(t, "rule frontend port", deref(r.FrontendPort), int32(80))
	eq(t, "rule backend port", deref(r.BackendPort), int32(80))
	eq(t, "rule floating IP", deref(r.EnableFloatingIP), true)
	eq(t, "rule TCP reset", deref(r.EnableTCPReset), true)
	eq(t, "rule idle timeout", deref(r.IdleTimeoutInMinutes), int32(4))
	eq(t, "rule load distribution", deref(r.LoadDistribution), armnetwork.LoadDistributionDefault)
	eq(t, "rule probe", lastSeg(deref(deref(r.Probe).ID)), rule80)
	eq(t, "rule pool", lastSeg(deref(deref(r.BackendAddressPool).ID)), azurenames.BackendPoolName(lbCluster, azurenames.IPv4))
	p := v.Probes[rule80].Properties
	eq(t, "probe protocol", deref(p.Protocol), armnetwork.ProbeProtocolTCP)
	eq(t, "probe port", deref(p.Port), s.Spec.Ports[0].NodePort)
	eq(t, "probe interval", deref(p.IntervalInSeconds), int32(annotations.DefaultProbeInterval))
	eq(t, "probe threshold", deref(p.ProbeThreshold), int32(annotations.DefaultProbeThreshold))
	l.waitPool(lbCluster, l.nodeNames())

	allow80 := azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{annotations.ServiceTagInternet}, []int32{80})
	eqs(t, "NSG rules to the IP", nsgRulesTo(st.NSG, ip), []string{allow80})
	if nr := nsgRule(st.NSG, allow80); nr != nil {
		eqs(t, "NSG sources", ruleSources(nr), []string{"Internet"})
		eqs(t, "NSG ports", rulePorts(nr), []string{"80"})
		eq(t, "NSG access", deref(nr.Properties.Access), armnetwork.SecurityRuleAccessAllow)
		eq(t, "NSG direction", deref(nr.Properties.Direction), armnetwork.SecurityRuleDirectionInbound)
		if pr := deref(nr.Properties.Priority); !azurenames.IsManagedSecurityRule(allow80, pr) {
			t.Errorf("NSG rule priority %d outside the managed band", pr)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Add a port: exactly one rule and one probe more; frontend, old rule, PIP, pool and the
	// other NSG rules are untouched.
	before := st
	writesBefore := l.stats()
	l.update(s.Name, func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, lbTCP(443)) })
	rule443 := azurenames.RuleName(svcLB, "", corev1.ProtocolTCP, 443, false, azurenames.IPv4)
	allowBoth := azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"Internet"}, []int32{80, 443})
	l.waitFor("rule for port 443 and its NSG rule", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		v := view(st.LBs[lbCluster], svcLB)
		if v.Rules[rule443] == nil || !slices.Equal(nsgRulesTo(st.NSG, ip), []string{allowBoth}) {
			return false, fmt.Errorf("rules %v, NSG rules to %s: %v", sortedKeys(v.Rules), ip, nsgRulesTo(st.NSG, ip))
		}
		return true, nil
	}, lbWait)
	after := l.mustState()
	delta := l.stats()
	v2 := view(after.LBs[lbCluster], svcLB)
	fes, rules, probes = v2.names()
	eqs(t, "frontends after adding a port", fes, []string{svcLB})
	eqs(t, "rules after adding a port", rules, []string{rule443, rule80})
	eqs(t, "probes after adding a port", probes, []string{rule443, rule80})
	// (its read-only list of rules gains the new rule, which azsim derives)
	eq(t, "frontend unchanged", canon(t, v2.Frontends[svcLB], "loadBalancingRules"), canon(t, v.Frontends[svcLB], "loadBalancingRules"))
	eq(t, "port 80 rule unchanged", canon(t, v2.Rules[rule80]), canon(t, v.Rules[rule80]))
	eq(t, "port 80 probe unchanged", canon(t, v2.Probes[rule80]), canon(t, v.Probes[rule80]))
	eq(t, "PIP etag unchanged", deref(after.PIPs[l.rg+"/"+pipName].Etag), deref(before.PIPs[l.rg+"/"+pipName].Etag))
	eqs(t, "pool members unchanged", l.poolNodes(after.LBs[lbCluster]), l.nodeNames())
	eq(t, "PIP writes for adding a port", delta.Writes("publicIPAddresses")-writesBefore.Writes("publicIPAddresses"), int64(0))
	eq(t, "pool writes for adding a port", delta.Writes("backendAddressPools")-writesBefore.Writes("backendAddressPools"), int64(0))
	if n := delta.Writes("loadBalancers") - writesBefore.Writes("loadBalancers"); n < 1 || n > 2 {
		t.Errorf("LB writes for adding a port = %d, want 1 (2 if a resync raced)", n)
	}
	for _, r := range before.NSG.Properties.SecurityRules {
		if *r.Name == allow80 {
			continue
		}
		if got := nsgRule(after.NSG, *r.Name); got == nil || canon(t, got) != canon(t, r) {
			t.Errorf("NSG rule %s changed by adding a port to another service", *r.Name)
		}
	}
	l.deleteAndWaitGone(l.get(s.Name))
}

func lastSeg(id string) string { return id[strings.LastIndex(id, "/")+1:] }

// lbRuleCase is one service of the rule-options table and what its rules and probes must be.
type lbRuleCase struct {
	name  string
	ann   map[string]string
	ports []corev1.ServicePort
	edit  func(*corev1.Service)
	check func(t *testing.T, s *corev1.Service, v svcView, st *azState)
}

func portAnn(port int32, rest string) string {
	return fmt.Sprintf("%sport_%d_%s", annotations.Prefix, port, rest)
}

func ruleOf(t *testing.T, v svcView, s *corev1.Service, proto corev1.Protocol, port int32) *armnetwork.LoadBalancingRulePropertiesFormat {
	t.Helper()
	name := azurenames.RuleName(azurenames.ServiceLBName(s.UID), "", proto, port, false, azurenames.IPv4)
	r := v.Rules[name]
	if r == nil {
		t.Fatalf("no rule %s; have %v", name, sortedKeys(v.Rules))
	}
	return r.Properties
}

func probeOf(t *testing.T, v svcView, s *corev1.Service, port int32) *armnetwork.ProbePropertiesFormat {
	t.Helper()
	name := azurenames.RuleName(azurenames.ServiceLBName(s.UID), "", corev1.ProtocolTCP, port, false, azurenames.IPv4)
	p := v.Probes[name]
	if p == nil {
		t.Fatalf("no probe %s; have %v", name, sortedKeys(v.Probes))
	}
	return p.Properties
}

var lbRuleCases = []lbRuleCase{
	{name: "idle-timeout", ann: map[string]string{annotations.TCPIdleTimeout: "10"},
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			eq(t, "idle timeout", deref(ruleOf(t, v, s, corev1.ProtocolTCP, 80).IdleTimeoutInMinutes), int32(10))
		}},
	{name: "no-tcp-reset", ann: map[string]string{annotations.DisableTCPReset: "true"},
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			eq(t, "TCP reset", deref(ruleOf(t, v, s, corev1.ProtocolTCP, 80).EnableTCPReset), false)
		}},
	{name: "no-floating-ip", ann: map[string]string{annotations.DisableFloatingIP: "true"},
		check: func(t *testing.T, s *corev1.Service, v svcView, st *azState) {
			r := ruleOf(t, v, s, corev1.ProtocolTCP, 80)
			eq(t, "floating IP", deref(r.EnableFloatingIP), false)
			eq(t, "backend port = nodePort", deref(r.BackendPort), s.Spec.Ports[0].NodePort)
			// NSG destinations are the node IPs and the port is the node port.
			name := azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"Internet"}, []int32{s.Spec.Ports[0].NodePort})
			nr := nsgRule(st.NSG, name)
			if nr == nil {
				t.Fatalf("no NSG rule %s", name)
			}
			eqs(t, "NSG destinations (node IPs)", ruleDestinations(nr), st.NodeIPs)
		}},
	{name: "session-affinity", edit: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP },
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			eq(t, "load distribution", deref(ruleOf(t, v, s, corev1.ProtocolTCP, 80).LoadDistribution), armnetwork.LoadDistributionSourceIP)
		}},
	{name: "probe-global", ann: map[string]string{annotations.ProbeProtocol: "Http", annotations.ProbeRequestPath: "/hz",
		annotations.ProbeInterval: "10", annotations.ProbeNumOfProbe: "3"},
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			p := probeOf(t, v, s, 80)
			eq(t, "probe protocol", deref(p.Protocol), armnetwork.ProbeProtocolHTTP)
			eq(t, "probe path", deref(p.RequestPath), "/hz")
			eq(t, "probe interval", deref(p.IntervalInSeconds), int32(10))
			eq(t, "probe threshold", deref(p.ProbeThreshold), int32(3))
		}},
	{name: "probe-per-port", ports: []corev1.ServicePort{lbTCP(80), lbTCP(443)},
		ann: map[string]string{portAnn(443, "health-probe_protocol"): "Https", portAnn(443, "health-probe_request-path"): "/secure",
			portAnn(443, "health-probe_interval"): "7"},
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			eq(t, "port 80 probe protocol", deref(probeOf(t, v, s, 80).Protocol), armnetwork.ProbeProtocolTCP)
			p := probeOf(t, v, s, 443)
			eq(t, "port 443 probe protocol", deref(p.Protocol), armnetwork.ProbeProtocolHTTPS)
			eq(t, "port 443 probe path", deref(p.RequestPath), "/secure")
			eq(t, "port 443 probe interval", deref(p.IntervalInSeconds), int32(7))
			eq(t, "port 80 probe interval", deref(probeOf(t, v, s, 80).IntervalInSeconds), int32(5))
		}},
	{name: "app-protocol", edit: func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = ptr("http") },
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			p := probeOf(t, v, s, 80)
			eq(t, "probe protocol from appProtocol", deref(p.Protocol), armnetwork.ProbeProtocolHTTP)
			eq(t, "probe path", deref(p.RequestPath), "/")
		}},
	{name: "local", edit: func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			hc := s.Spec.HealthCheckNodePort
			if hc == 0 {
				t.Fatal("no healthCheckNodePort allocated")
			}
			p := probeOf(t, v, s, hc)
			eq(t, "local probe protocol", deref(p.Protocol), armnetwork.ProbeProtocolHTTP)
			eq(t, "local probe port", deref(p.Port), hc)
			eq(t, "local probe path", deref(p.RequestPath), annotations.LocalHealthCheckPath)
			eq(t, "probes", len(v.Probes), 1)
			eq(t, "rule probe", lastSeg(deref(deref(ruleOf(t, v, s, corev1.ProtocolTCP, 80).Probe).ID)),
				azurenames.LocalProbeName(azurenames.ServiceLBName(s.UID), hc, false, azurenames.IPv4))
		}},
	{name: "no-lb-rule", ports: []corev1.ServicePort{lbTCP(80), lbTCP(81)}, ann: map[string]string{portAnn(81, "no_lb_rule"): "true"},
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			_, rules, probes := v.names()
			want := []string{azurenames.RuleName(azurenames.ServiceLBName(s.UID), "", corev1.ProtocolTCP, 80, false, azurenames.IPv4)}
			eqs(t, "rules", rules, want)
			eqs(t, "probes", probes, want)
		}},
	{name: "no-probe-rule", ann: map[string]string{portAnn(80, "no_probe_rule"): "true"},
		check: func(t *testing.T, s *corev1.Service, v svcView, _ *azState) {
			eq(t, "probes", len(v.Probes), 0)
			if r := ruleOf(t, v, s, corev1.ProtocolTCP, 80); r.Probe != nil {
				t.Errorf("rule has probe %s", deref(r.Probe.ID))
			}
		}},
	{name: "mixed", ports: []corev1.ServicePort{lbTCP(53), lbUDP(53)},
		check: func(t *testing.T, s *corev1.Service, v svcView, st *azState) {
			tcp, udp := ruleOf(t, v, s, corev1.ProtocolTCP, 53), ruleOf(t, v, s, corev1.ProtocolUDP, 53)
			eq(t, "TCP rule protocol", deref(tcp.Protocol), armnetwork.TransportProtocolTCP)
			eq(t, "UDP rule protocol", deref(udp.Protocol), armnetwork.TransportProtocolUDP)
			if udp.Probe != nil {
				t.Errorf("UDP rule has a probe")
			}
			eq(t, "probes", len(v.Probes), 1)
			ip := ingressIPs(s)[0]
			eqs(t, "NSG rules", nsgRulesTo(st.NSG, ip), sortStrings(
				azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"Internet"}, []int32{53}),
				azurenames.AllowRuleName("Udp", azurenames.IPv4, []string{"Internet"}, []int32{53})))
		}},
}

func sortStrings(s ...string) []string {
	slices.Sort(s)
	return s
}

// lbTestRuleOptions creates every case at once (one burst of reconciles), then checks each.
func lbTestRuleOptions(l *lbEnv) {
	svcs := map[string]*corev1.Service{}
	for _, c := range lbRuleCases {
		s := lbService(c.name, c.ann, c.ports...)
		if c.edit != nil {
			c.edit(s)
		}
		svcs[c.name] = l.create(s)
	}
	for _, c := range lbRuleCases {
		svcs[c.name] = l.waitIP(c.name)
	}
	st := l.mustState()
	st.NodeIPs = l.nodeIPs()
	for _, c := range lbRuleCases {
		l.t.Run(c.name, func(t *testing.T) {
			s := svcs[c.name]
			v := view(st.LBs[lbCluster], azurenames.ServiceLBName(s.UID))
			if len(v.Frontends) != 1 {
				t.Errorf("frontends %v, want one", sortedKeys(v.Frontends))
			}
			c.check(t, s, v, st)
		})
	}
	for _, c := range lbRuleCases {
		l.deleteAndWaitGone(svcs[c.name])
	}
}

// lbTestNSGSources: source ranges, allowed service tags, deny-all-except.
func lbTestNSGSources(l *lbEnv) {
	t := l.t
	ranges := lbService("ranges", nil)
	ranges.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/24", "10.1.0.0/16"}
	tags := lbService("tags", map[string]string{annotations.AllowedServiceTags: "AzureCloud,AzureFrontDoor.Backend"})
	deny := lbService("deny", map[string]string{annotations.AllowedIPRanges: "203.0.113.0/24",
		annotations.DenyAllExceptLBSources: "true"})
	var svcs []*corev1.Service
	for _, s := range []*corev1.Service{ranges, tags, deny} {
		l.create(s)
	}
	for _, s := range []*corev1.Service{ranges, tags, deny} {
		svcs = append(svcs, l.waitIP(s.Name))
	}
	st := l.mustState()
	ipOf := func(i int) string { return ingressIPs(svcs[i])[0] }

	wantRanges := azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"10.1.0.0/16", "192.168.0.0/24"}, []int32{80})
	eqs(t, "ranges: NSG rules", nsgRulesTo(st.NSG, ipOf(0)), []string{wantRanges})
	if r := nsgRule(st.NSG, wantRanges); r != nil {
		eqs(t, "ranges: sources", ruleSources(r), []string{"10.1.0.0/16", "192.168.0.0/24"})
	}
	wantTags := sortStrings(azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"AzureCloud"}, []int32{80}),
		azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"AzureFrontDoor.Backend"}, []int32{80}))
	eqs(t, "tags: NSG rules (one per tag, no Internet)", nsgRulesTo(st.NSG, ipOf(1)), wantTags)
	wantDeny := sortStrings(azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"203.0.113.0/24"}, []int32{80}),
		azurenames.DenyAllRuleName(azurenames.IPv4))
	eqs(t, "deny-all: NSG rules", nsgRulesTo(st.NSG, ipOf(2)), wantDeny)
	if r := nsgRule(st.NSG, azurenames.DenyAllRuleName(azurenames.IPv4)); r != nil {
		eq(t, "deny-all access", deref(r.Properties.Access), armnetwork.SecurityRuleAccessDeny)
		allow := nsgRule(st.NSG, wantDeny[0])
		if allow != nil && deref(allow.Properties.Priority) >= deref(r.Properties.Priority) {
			t.Errorf("deny-all priority %d is not after the allow rule's %d", deref(r.Properties.Priority), deref(allow.Properties.Priority))
		}
	}
	// Changing the ranges replaces the rule; the old one disappears.
	l.update("ranges", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"172.16.0.0/12"} })
	want := []string{azurenames.AllowRuleName("Tcp", azurenames.IPv4, []string{"172.16.0.0/12"}, []int32{80})}
	l.waitFor("NSG rule for the new range", func(ctx context.Context) (bool, error) {
		st, err := l.state(ctx)
		if err != nil {
			return false, err
		}
		got := nsgRulesTo(st.NSG, ipOf(0))
		return slices.Equal(got, want), fmt.Errorf("NSG rules to %s: %v", ipOf(0), got)
	}, lbWait)
	for _, s := range svcs {
		l.deleteAndWaitGone(l.get(s.Name))
	}
}

func ptr[T any](v T) *T { return &v }
