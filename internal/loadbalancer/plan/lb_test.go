package plan

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tags"
)

// ruleWant is the expected shape of one rule.
type ruleWant struct {
	name     string
	proto    armnetwork.TransportProtocol
	fePort   int32
	bePort   int32
	floating bool
	tcpReset any // nil or bool
	idle     int32
	dist     armnetwork.LoadDistribution
	frontend string // frontend name
	pool     string
	probe    string // probe name, "" for none
	lbID     string
}

type probeWant struct {
	name      string
	proto     armnetwork.ProbeProtocol
	port      int32
	path      any // nil or string
	interval  int32
	threshold int32
}

func checkRules(t *testing.T, lb *armnetwork.LoadBalancer, want []ruleWant) {
	t.Helper()
	if len(lb.Properties.LoadBalancingRules) != len(want) {
		t.Fatalf("rules %v, want %d", ruleNames(lb), len(want))
	}
	for _, w := range want {
		r := findRule(lb, w.name)
		if r == nil {
			t.Fatalf("rule %s missing; have %v", w.name, ruleNames(lb))
		}
		p := r.Properties
		id := w.lbID
		if id == "" {
			id = lbID
		}
		got := []any{*p.Protocol, *p.FrontendPort, *p.BackendPort, *p.EnableFloatingIP, deref(p.EnableTCPReset), *p.IdleTimeoutInMinutes,
			*p.LoadDistribution, *p.FrontendIPConfiguration.ID, *p.BackendAddressPool.ID, *p.DisableOutboundSnat}
		exp := []any{w.proto, w.fePort, w.bePort, w.floating, w.tcpReset, w.idle, w.dist,
			id + "/frontendIPConfigurations/" + w.frontend, id + "/backendAddressPools/" + w.pool, false}
		for i := range got {
			if got[i] != exp[i] {
				t.Errorf("rule %s field %d: got %v want %v", w.name, i, got[i], exp[i])
			}
		}
		switch {
		case w.probe == "" && p.Probe != nil:
			t.Errorf("rule %s: unexpected probe %s", w.name, *p.Probe.ID)
		case w.probe != "" && (p.Probe == nil || *p.Probe.ID != id+"/probes/"+w.probe):
			t.Errorf("rule %s: probe %v want %s", w.name, p.Probe, w.probe)
		}
	}
}

func checkProbes(t *testing.T, lb *armnetwork.LoadBalancer, want []probeWant) {
	t.Helper()
	if len(lb.Properties.Probes) != len(want) {
		t.Fatalf("probes %v, want %d", probeNames(lb), len(want))
	}
	for _, w := range want {
		p := findProbe(lb, w.name)
		if p == nil {
			t.Fatalf("probe %s missing; have %v", w.name, probeNames(lb))
		}
		pp := p.Properties
		got := []any{*pp.Protocol, *pp.Port, deref(pp.RequestPath), *pp.IntervalInSeconds, *pp.ProbeThreshold}
		exp := []any{w.proto, w.port, w.path, w.interval, w.threshold}
		for i := range got {
			if got[i] != exp[i] {
				t.Errorf("probe %s field %d: got %v want %v", w.name, i, got[i], exp[i])
			}
		}
	}
}

var (
	tcpT   = armnetwork.TransportProtocolTCP
	udpT   = armnetwork.TransportProtocolUDP
	allT   = armnetwork.TransportProtocolAll
	dflt   = armnetwork.LoadDistributionDefault
	srcIP  = armnetwork.LoadDistributionSourceIP
	pTCP   = armnetwork.ProbeProtocolTCP
	pHTTP  = armnetwork.ProbeProtocolHTTP
	pHTTPS = armnetwork.ProbeProtocolHTTPS
)

func TestApplyServicePublicRulesAndProbes(t *testing.T) {
	http := "http"
	tests := []struct {
		name   string
		opts   []svcOpt
		rules  []ruleWant
		probes []probeWant
	}{
		{
			name:   "single TCP port",
			rules:  []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"}},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30080, nil, 5, 2}},
		},
		{
			name:  "UDP has no probe and no TCP reset",
			opts:  []svcOpt{withPorts(udp(53, 30053))},
			rules: []ruleWant{{name: svcA + "-UDP-53", proto: udpT, fePort: 53, bePort: 53, floating: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes"}},
		},
		{
			name:  "SCTP uses protocol All without probe",
			opts:  []svcOpt{withPorts(v1.ServicePort{Port: 9, NodePort: 30009, Protocol: v1.ProtocolSCTP})},
			rules: []ruleWant{{name: svcA + "-SCTP-9", proto: allT, fePort: 9, bePort: 9, floating: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes"}},
		},
		{
			name: "mixed TCP and UDP on one port",
			opts: []svcOpt{withPorts(tcp(53, 30053), udp(53, 30054))},
			rules: []ruleWant{
				{name: svcA + "-TCP-53", proto: tcpT, fePort: 53, bePort: 53, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-53"},
				{name: svcA + "-UDP-53", proto: udpT, fePort: 53, bePort: 53, floating: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes"},
			},
			probes: []probeWant{{svcA + "-TCP-53", pTCP, 30053, nil, 5, 2}},
		},
		{
			name:   "idle timeout and TCP reset disabled",
			opts:   []svcOpt{withAnn(annotations.TCPIdleTimeout, "30"), withAnn(annotations.DisableTCPReset, "true")},
			rules:  []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: false, idle: 30, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"}},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30080, nil, 5, 2}},
		},
		{
			name:   "floating IP disabled targets the node port",
			opts:   []svcOpt{withAnn(annotations.DisableFloatingIP, "true")},
			rules:  []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 30080, floating: false, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"}},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30080, nil, 5, 2}},
		},
		{
			name:   "client IP affinity",
			opts:   []svcOpt{func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }},
			rules:  []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: srcIP, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"}},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30080, nil, 5, 2}},
		},
		{
			name: "global HTTP probe with path, interval and threshold",
			opts: []svcOpt{withAnn(annotations.ProbeProtocol, "Http"), withAnn(annotations.ProbeRequestPath, "/ready"),
				withAnn(annotations.ProbeInterval, "10"), withAnn(annotations.ProbeNumOfProbe, "3")},
			rules:  []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"}},
			probes: []probeWant{{svcA + "-TCP-80", pHTTP, 30080, "/ready", 10, 3}},
		},
		{
			name:   "HTTP probe default path",
			opts:   []svcOpt{withAnn(annotations.ProbeProtocol, "http")},
			rules:  []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"}},
			probes: []probeWant{{svcA + "-TCP-80", pHTTP, 30080, "/", 5, 2}},
		},
		{
			name: "precedence: per-port beats appProtocol beats global",
			opts: []svcOpt{
				withPorts(tcp(80, 30080), v1.ServicePort{Name: "web", Port: 81, NodePort: 30081, Protocol: v1.ProtocolTCP, AppProtocol: &http}, tcp(82, 30082)),
				withAnn(annotations.ProbeProtocol, "Tcp"),
				withAnn(annotations.PortProbeKey(80, annotations.PortProbeProtocol), "Https"),
				withAnn(annotations.PortProbeKey(80, annotations.PortProbeRequestPath), "/secure"),
				withAnn(annotations.PortProbeKey(80, annotations.PortProbeInterval), "7"),
				withAnn(annotations.PortProbeKey(80, annotations.PortProbeNumOfProbe), "4"),
			},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
				{name: svcA + "-TCP-81", proto: tcpT, fePort: 81, bePort: 81, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-81"},
				{name: svcA + "-TCP-82", proto: tcpT, fePort: 82, bePort: 82, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-82"},
			},
			probes: []probeWant{
				{svcA + "-TCP-80", pHTTPS, 30080, "/secure", 7, 4},
				{svcA + "-TCP-81", pHTTP, 30081, "/", 5, 2},
				{svcA + "-TCP-82", pTCP, 30082, nil, 5, 2},
			},
		},
		{
			name: "unknown appProtocol falls back to Tcp",
			opts: []svcOpt{withPorts(v1.ServicePort{Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP, AppProtocol: to.Ptr("kubernetes.io/h2c")})},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
			},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30080, nil, 5, 2}},
		},
		{
			name: "per-port probe port points at another port's node port",
			opts: []svcOpt{withPorts(tcp(80, 30080), tcp(8080, 30880)), withAnn(annotations.PortProbeKey(80, annotations.PortProbePort), "p8080")},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
				{name: svcA + "-TCP-8080", proto: tcpT, fePort: 8080, bePort: 8080, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-8080"},
			},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30880, nil, 5, 2}, {svcA + "-TCP-8080", pTCP, 30880, nil, 5, 2}},
		},
		{
			name: "per-port probe port that is no service port is probed directly",
			opts: []svcOpt{withPorts(tcp(80, 30080)), withAnn(annotations.PortProbeKey(80, annotations.PortProbePort), "10256")},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
			},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 10256, nil, 5, 2}},
		},
		{
			name: "no_lb_rule and no_probe_rule",
			opts: []svcOpt{withPorts(tcp(80, 30080), tcp(443, 30443), tcp(8080, 30880)),
				withAnn(annotations.PortNoLBRuleKey(443), "true"), withAnn(annotations.PortNoProbeRuleKey(8080), "true")},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
				{name: svcA + "-TCP-8080", proto: tcpT, fePort: 8080, bePort: 8080, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes"},
			},
			probes: []probeWant{{svcA + "-TCP-80", pTCP, 30080, nil, 5, 2}},
		},
		{
			name: "externalTrafficPolicy Local probes the health check node port",
			opts: []svcOpt{withPorts(tcp(80, 30080), udp(53, 30053)), local(32000), withAnn(annotations.ProbeInterval, "6")},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-32000"},
				{name: svcA + "-UDP-53", proto: udpT, fePort: 53, bePort: 53, floating: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-32000"},
			},
			probes: []probeWant{{svcA + "-TCP-32000", pHTTP, 32000, "/healthz", 6, 2}},
		},
		{
			name: "Local with every probe disabled has no probe",
			opts: []svcOpt{local(32000), withAnn(annotations.PortNoProbeRuleKey(80), "true")},
			rules: []ruleWant{
				{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mkService(t, uidA, "a", tc.opts...)
			lb, err := ApplyService(nil, cluster(), s, publicFronts(s, "kubernetes-"+svcA))
			if err != nil {
				t.Fatal(err)
			}
			if *lb.Name != "kubernetes" || *lb.SKU.Name != armnetwork.LoadBalancerSKUNameStandard || *lb.Location != "eastus" {
				t.Fatalf("lb %s %v", *lb.Name, lb.SKU)
			}
			if !eqStrings(frontendNames(lb), []string{svcA}) || !eqStrings(poolNames(lb), []string{"kubernetes"}) {
				t.Fatalf("frontends %v pools %v", frontendNames(lb), poolNames(lb))
			}
			fe := lb.Properties.FrontendIPConfigurations[0]
			if *fe.Properties.PublicIPAddress.ID != pipRG+"kubernetes-"+svcA || len(fe.Zones) != 0 {
				t.Fatalf("frontend %+v", fe)
			}
			checkRules(t, lb, tc.rules)
			checkProbes(t, lb, tc.probes)

			// Idempotent: applying again over the stored model changes nothing.
			again, err := ApplyService(clone(t, lb), cluster(), s, publicFronts(s, "kubernetes-"+svcA))
			if err != nil {
				t.Fatal(err)
			}
			if mustJSON(t, again) != mustJSON(t, lb) {
				t.Fatalf("second apply changed the LB:\n%s\n%s", mustJSON(t, lb), mustJSON(t, again))
			}
		})
	}
}

func TestApplyServiceInternal(t *testing.T) {
	t.Run("HA ports", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.Internal, "true"), withAnn(annotations.HAPorts, "true"),
			withPorts(udp(53, 30053), tcp(80, 30080), tcp(443, 30443)))
		lb, err := ApplyService(nil, cluster(), s, []Frontend{internalFront(naming.IPv4)})
		if err != nil {
			t.Fatal(err)
		}
		if *lb.Name != "kubernetes-internal" {
			t.Fatal(*lb.Name)
		}
		checkRules(t, lb, []ruleWant{{name: svcA + "-UDP-53", proto: allT, fePort: 0, bePort: 0, floating: true, tcpReset: true, idle: 4,
			dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-UDP-53", lbID: ilbID}})
		checkProbes(t, lb, []probeWant{{svcA + "-UDP-53", pTCP, 30080, nil, 5, 2}})
	})
	t.Run("dynamic zone-redundant frontend keeps its allocated address", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.Internal, "true"))
		lb, err := ApplyService(nil, cluster(), s, []Frontend{internalFront(naming.IPv4)})
		if err != nil {
			t.Fatal(err)
		}
		fe := lb.Properties.FrontendIPConfigurations[0]
		if *fe.Properties.PrivateIPAllocationMethod != armnetwork.IPAllocationMethodDynamic || *fe.Properties.Subnet.ID != subnet1 ||
			len(fe.Zones) != 3 || *fe.Properties.PrivateIPAddressVersion != armnetwork.IPVersionIPv4 || fe.Properties.PublicIPAddress != nil {
			t.Fatalf("frontend %s", mustJSON(t, fe))
		}
		// ARM allocated 10.0.0.7; a later reconcile keeps it and does not touch the zones.
		stored := clone(t, lb)
		stored.Properties.FrontendIPConfigurations[0].Properties.PrivateIPAddress = to.Ptr("10.0.0.7")
		stored.Properties.FrontendIPConfigurations[0].Zones = []*string{to.Ptr("1")}
		want := mustJSON(t, stored)
		got, err := ApplyService(stored, cluster(), s, []Frontend{internalFront(naming.IPv4)})
		if err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, got) != want {
			t.Fatalf("reconcile changed the internal frontend:\n%s\n%s", want, mustJSON(t, got))
		}
	})
	t.Run("static address and subnet annotation names", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.Internal, "true"), withAnn(annotations.InternalSubnet, "subnet1"),
			withAnn(annotations.IPv4, "10.0.0.10"))
		fr := internalFront(naming.IPv4)
		fr.PrivateIP = s.Opts.IPv4
		lb, err := ApplyService(nil, cluster(), s, []Frontend{fr})
		if err != nil {
			t.Fatal(err)
		}
		fe := lb.Properties.FrontendIPConfigurations[0]
		if *fe.Name != svcA+"-subnet1" || *fe.Properties.PrivateIPAllocationMethod != armnetwork.IPAllocationMethodStatic ||
			*fe.Properties.PrivateIPAddress != "10.0.0.10" {
			t.Fatalf("frontend %s", mustJSON(t, fe))
		}
		checkRules(t, lb, []ruleWant{{name: svcA + "-subnet1-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true,
			idle: 4, dist: dflt, frontend: svcA + "-subnet1", pool: "kubernetes", probe: svcA + "-subnet1-TCP-80", lbID: ilbID}})
	})
	t.Run("internal IPv6 cannot float", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.Internal, "true"), ipv6Only)
		lb, err := ApplyService(nil, cluster(), s, []Frontend{internalFront(naming.IPv6)})
		if err != nil {
			t.Fatal(err)
		}
		checkRules(t, lb, []ruleWant{{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 30080, floating: false, tcpReset: true,
			idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes-IPv6", probe: svcA + "-TCP-80", lbID: ilbID}})
		if v := *lb.Properties.FrontendIPConfigurations[0].Properties.PrivateIPAddressVersion; v != armnetwork.IPVersionIPv6 {
			t.Fatal(v)
		}
	})
	t.Run("no subnet is an error", func(t *testing.T) {
		s := mkService(t, uidA, "a", withAnn(annotations.Internal, "true"))
		if _, err := ApplyService(nil, cluster(), s, []Frontend{{Family: naming.IPv4}}); err == nil {
			t.Fatal("want error")
		}
	})
}

func TestApplyServiceDualStack(t *testing.T) {
	s := mkService(t, uidA, "a", dualStack)
	lb, err := ApplyService(nil, cluster(), s, publicFronts(s, "kubernetes-"+svcA, "kubernetes-"+svcA+"-IPv6"))
	if err != nil {
		t.Fatal(err)
	}
	if !eqStrings(frontendNames(lb), []string{svcA, svcA + "-IPv6"}) || !eqStrings(poolNames(lb), []string{"kubernetes", "kubernetes-IPv6"}) {
		t.Fatalf("frontends %v pools %v", frontendNames(lb), poolNames(lb))
	}
	checkRules(t, lb, []ruleWant{
		{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
		{name: svcA + "-TCP-80-IPv6", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA + "-IPv6", pool: "kubernetes-IPv6", probe: svcA + "-TCP-80-IPv6"},
	})
	if len(lb.Properties.Probes) != 2 {
		t.Fatal(probeNames(lb))
	}
	// Back to IPv4 only: the IPv6 frontend, rule and probe go; the pool stays (nodes are in it).
	s4 := mkService(t, uidA, "a")
	lb, err = ApplyService(lb, cluster(), s4, publicFronts(s4, "kubernetes-"+svcA))
	if err != nil {
		t.Fatal(err)
	}
	if !eqStrings(frontendNames(lb), []string{svcA}) || !eqStrings(ruleNames(lb), []string{svcA + "-TCP-80"}) || !eqStrings(probeNames(lb), []string{svcA + "-TCP-80"}) {
		t.Fatalf("after single-stack: %v %v %v", frontendNames(lb), ruleNames(lb), probeNames(lb))
	}
}

func TestApplyServiceKeepsOthersAndRemovesStale(t *testing.T) {
	c := cluster()
	userRule := &armnetwork.LoadBalancingRule{Name: to.Ptr("user-rule"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
		FrontendPort: to.Ptr[int32](22), Protocol: to.Ptr(tcpT),
		FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/user-fe")}}}
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes"), ID: to.Ptr(lbID), Etag: to.Ptr("W/\"1\""), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("user-fe"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipRG + "user-pip")}}}},
		LoadBalancingRules: []*armnetwork.LoadBalancingRule{userRule},
		Probes:             []*armnetwork.Probe{{Name: to.Ptr("user-probe"), Properties: &armnetwork.ProbePropertiesFormat{Port: to.Ptr[int32](22)}}},
	}}
	s := mkService(t, uidA, "a", withPorts(tcp(80, 30080), tcp(443, 30443)))
	lb, err := ApplyService(lb, c, s, publicFronts(s, "kubernetes-"+svcA))
	if err != nil {
		t.Fatal(err)
	}
	if !eqStrings(ruleNames(lb), []string{"user-rule", svcA + "-TCP-80", svcA + "-TCP-443"}) {
		t.Fatal(ruleNames(lb))
	}
	// Port 443 goes, 8443 comes: the stale rule and probe are removed; user objects stay.
	s2 := mkService(t, uidA, "a", withPorts(tcp(80, 30080), tcp(8443, 30843)))
	lb, err = ApplyService(lb, c, s2, publicFronts(s2, "kubernetes-"+svcA))
	if err != nil {
		t.Fatal(err)
	}
	if !eqStrings(ruleNames(lb), []string{"user-rule", svcA + "-TCP-80", svcA + "-TCP-8443"}) ||
		!eqStrings(probeNames(lb), []string{"user-probe", svcA + "-TCP-80", svcA + "-TCP-8443"}) ||
		!eqStrings(frontendNames(lb), []string{"user-fe", svcA}) || *lb.Etag != "W/\"1\"" {
		t.Fatalf("rules %v probes %v frontends %v", ruleNames(lb), probeNames(lb), frontendNames(lb))
	}
	// Read-only fields ARM returns survive a reconcile.
	lb.Properties.LoadBalancingRules[1].Properties.ProvisioningState = to.Ptr(armnetwork.ProvisioningStateSucceeded)
	lb.Properties.LoadBalancingRules[1].ID = to.Ptr(lbID + "/loadBalancingRules/" + svcA + "-TCP-80")
	before := mustJSON(t, lb)
	lb, err = ApplyService(lb, c, s2, publicFronts(s2, "kubernetes-"+svcA))
	if err != nil || mustJSON(t, lb) != before {
		t.Fatalf("reconcile not idempotent (%v)", err)
	}
}

func TestSharedIPAcrossServices(t *testing.T) {
	c := cluster()
	a := mkService(t, uidA, "a")
	lb, err := ApplyService(nil, c, a, publicFronts(a, "kubernetes-"+svcA))
	if err != nil {
		t.Fatal(err)
	}
	// B asks for A's address: it lands on A's frontend with rules of its own.
	b := mkService(t, uidB, "b", withPorts(tcp(443, 31443)))
	lb, err = ApplyService(lb, c, b, publicFronts(b, "kubernetes-"+svcA))
	if err != nil {
		t.Fatal(err)
	}
	if !eqStrings(frontendNames(lb), []string{svcA}) {
		t.Fatalf("frontends %v", frontendNames(lb))
	}
	checkRules(t, lb, []ruleWant{
		{name: svcA + "-TCP-80", proto: tcpT, fePort: 80, bePort: 80, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcA + "-TCP-80"},
		{name: svcB + "-TCP-443", proto: tcpT, fePort: 443, bePort: 443, floating: true, tcpReset: true, idle: 4, dist: dflt, frontend: svcA, pool: "kubernetes", probe: svcB + "-TCP-443"},
	})
	if got := ServiceFrontends(lb, svcB); len(got) != 1 || *got[0].Name != svcA {
		t.Fatalf("B's frontends %v", got)
	}
	if !OwnsFrontend(lb, svcB) || OwnsFrontend(lb, "anotherservice") {
		t.Fatal("OwnsFrontend")
	}
	// A third service on the same port conflicts.
	c3 := mkService(t, "cccccccc-1111-2222-3333-444444444444", "c", withPorts(tcp(443, 32443)))
	if _, err := ApplyService(clone(t, lb), c, c3, publicFronts(c3, "kubernetes-"+svcA)); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("want conflict, got %v", err)
	}
	// A goes away: its frontend stays because B's rule uses it.
	lb = RemoveService(lb, c, svcA)
	if lb == nil || !eqStrings(frontendNames(lb), []string{svcA}) || !eqStrings(ruleNames(lb), []string{svcB + "-TCP-443"}) ||
		!eqStrings(probeNames(lb), []string{svcB + "-TCP-443"}) {
		t.Fatalf("after removing A: %v", lb)
	}
	// B goes away: nothing is left, the LB is to be deleted.
	if got := RemoveService(lb, c, svcB); got != nil {
		t.Fatalf("want deletion, got %v", frontendNames(got))
	}
}

func TestRemoveServiceKeepsFrontendUsedByOutboundRule(t *testing.T) {
	c := cluster()
	a := mkService(t, uidA, "a")
	lb, _ := ApplyService(nil, c, a, publicFronts(a, "kubernetes-"+svcA))
	lb.Properties.OutboundRules = []*armnetwork.OutboundRule{{Name: to.Ptr("outbound"), Properties: &armnetwork.OutboundRulePropertiesFormat{
		FrontendIPConfigurations: []*armnetwork.SubResource{{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + svcA)}}}}}
	lb = RemoveService(lb, c, svcA)
	if lb == nil || len(lb.Properties.FrontendIPConfigurations) != 1 || len(lb.Properties.LoadBalancingRules) != 0 {
		t.Fatal("frontend referenced by an outbound rule must stay")
	}
}

func TestSharedProbeMode(t *testing.T) {
	c := cluster()
	c.SharedProbe = true
	a := mkService(t, uidA, "a")
	b := mkService(t, uidB, "b", withPorts(tcp(443, 31443)), local(32000))
	lb, err := ApplyService(nil, c, a, publicFronts(a, "pa"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err = ApplyService(lb, c, b, publicFronts(b, "pb"))
	if err != nil {
		t.Fatal(err)
	}
	checkProbes(t, lb, []probeWant{{naming.SharedProbeName, pHTTP, 10256, "/healthz", 5, 2}, {svcB + "-TCP-32000", pHTTP, 32000, "/healthz", 5, 2}})
	if p := findRule(lb, svcA+"-TCP-80").Properties.Probe; *p.ID != lbID+"/probes/"+naming.SharedProbeName {
		t.Fatal(*p.ID)
	}
	lb = RemoveService(lb, c, svcA)
	if !eqStrings(probeNames(lb), []string{svcB + "-TCP-32000"}) {
		t.Fatalf("shared probe must go with its last user: %v", probeNames(lb))
	}
}

func TestOutboundSNATAndClusterSettings(t *testing.T) {
	c := cluster()
	c.DisableOutboundSNAT = true
	c.LBNamePrefix = "mylb"
	c.TagPolicy = tags.Policy{Config: map[string]string{"env": "prod"}}
	s := mkService(t, uidA, "a")
	lb, err := ApplyService(nil, c, s, publicFronts(s, "p"))
	if err != nil {
		t.Fatal(err)
	}
	if *lb.Name != "mylb" || *lb.Tags["env"] != "prod" || !*lb.Properties.LoadBalancingRules[0].Properties.DisableOutboundSnat {
		t.Fatalf("%s", mustJSON(t, lb))
	}
	// Pools keep the cluster name even when the LB name is overridden.
	if !eqStrings(poolNames(lb), []string{"kubernetes"}) {
		t.Fatal(poolNames(lb))
	}
	_ = netip.Addr{}
}

// While the cluster pool moves to IP-based membership its rules use the staging pool: a service
// written meanwhile puts its rules there too; without a staging pool they use the cluster pool.
func TestApplyServiceKeepsStagedRules(t *testing.T) {
	c := cluster()
	for _, tc := range []struct {
		name    string
		staging bool
		want    string
	}{
		{name: "no migration", want: lbID + "/backendAddressPools/kubernetes"},
		{name: "migration under way", staging: true, want: lbID + "/backendAddressPools/kubernetes_ip-migration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes"), ID: to.Ptr(lbID), Properties: &armnetwork.LoadBalancerPropertiesFormat{
				BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}}}}
			if tc.staging {
				lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, &armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes_ip-migration")})
			}
			s := mkService(t, uidA, "a", withPorts(tcp(80, 30080), udp(53, 30053)))
			lb, err := ApplyService(lb, c, s, publicFronts(s, "kubernetes-"+svcA))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range lb.Properties.LoadBalancingRules {
				if got := *r.Properties.BackendAddressPool.ID; got != tc.want {
					t.Errorf("rule %s uses %s, want %s", *r.Name, got, tc.want)
				}
			}
		})
	}
}
