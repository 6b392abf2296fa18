package plan

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
)

// Rule names with hashes computed independently (md5 of "<proto>_<sources>_<ports>").
const (
	ruleTCP80Internet   = "k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77"
	ruleTCP443Internet  = "k8s-azure-lb_allow_IPv4_bc87afc9aeeece13e643801ad1da615f"
	ruleTCP80and443     = "k8s-azure-lb_allow_IPv4_556f7044ec033071ec0dfcf7cd85bc93"
	ruleTCP80Ranges     = "k8s-azure-lb_allow_IPv4_26499811c86224c968cc1359a5a679eb"
	ruleTCP80AzureCloud = "k8s-azure-lb_allow_IPv4_802088238045253e1bed2dc8730b6bcd"
	ruleTCP80Storage    = "k8s-azure-lb_allow_IPv4_6ce51be4b821d0e95b9de38fb5cc4199"
	ruleTCP80AllowAll   = "k8s-azure-lb_allow_IPv4_171627efadb2d53e9804aac21fa6e380"
	ruleTCPNodePort     = "k8s-azure-lb_allow_IPv4_bc4e74614871d9c246abe0af3fccced5"
	ruleUDP53Internet   = "k8s-azure-lb_allow_IPv4_eacf5e21d4ad7b5345009ad51af9d388"
	ruleSCTP9Internet   = "k8s-azure-lb_allow_IPv4_2bf6c189e7a34ed7791c30772f5d7f10"
	ruleTCP80IPv6       = "k8s-azure-lb_allow_IPv6_d39272f7f57ed937951650d93992ad77"
	ruleTCP80IPv6Range  = "k8s-azure-lb_allow_IPv6_a17f7a798dd30c9c212663faebe9d610"
	// Sources 10.20.0.0/16,192.168.0.1/32; 10.20.0.0/16; 2001:db8::/32,2001:db9::/48.
	ruleTCP80Aggregated = "k8s-azure-lb_allow_IPv4_1255a198905cb75bf0c40ca65811846f"
	ruleTCP80Range16    = "k8s-azure-lb_allow_IPv4_77f5c5437d6af6d79a32705620d8eeed"
	ruleTCP80IPv6Two    = "k8s-azure-lb_allow_IPv6_7f7264ed66aaa87bdd9ae10c72654870"
	// What a version without aggregation named the rule of the six ranges of
	// sixRanges: sources 10.20.0.0/16,10.20.8.0/24,10.20.8.1/32,10.20.9.0/25,192.168.0.1/32,192.168.0.1/32.
	ruleTCP80SixRanges = "k8s-azure-lb_allow_IPv4_df8fe45fcb65522b4a0f2574e489aace"
)

// sixRanges overlap and repeat one value: NRP refuses such a rule.
var sixRanges = []string{"10.20.0.0/16", "192.168.0.1/32", "10.20.8.0/24", "10.20.9.0/25", "10.20.8.1/32", "192.168.0.1/32"}

func userRule(name string, prio int32) *armnetwork.SecurityRule {
	return &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: &armnetwork.SecurityRulePropertiesFormat{
		Priority: to.Ptr(prio), Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP), Access: to.Ptr(armnetwork.SecurityRuleAccessAllow),
		Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), SourceAddressPrefix: to.Ptr("*"),
		DestinationAddressPrefix: to.Ptr("203.0.113.1"), DestinationPortRange: to.Ptr("22")}}
}

func nsg(rules ...*armnetwork.SecurityRule) *armnetwork.SecurityGroup {
	return &armnetwork.SecurityGroup{Name: to.Ptr("nsg"), Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: rules}}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// ruleView is a compact, comparable view of one rule.
type ruleView struct {
	prio    int32
	proto   armnetwork.SecurityRuleProtocol
	access  armnetwork.SecurityRuleAccess
	sources string
	dests   string
	ports   string
}

func view(r *armnetwork.SecurityRule) ruleView {
	p := r.Properties
	join := func(one *string, many []*string) string {
		var out []string
		if one != nil {
			out = append(out, *one)
		}
		for _, m := range many {
			out = append(out, *m)
		}
		return strings.Join(out, ",")
	}
	return ruleView{*p.Priority, *p.Protocol, *p.Access, join(p.SourceAddressPrefix, p.SourceAddressPrefixes),
		join(p.DestinationAddressPrefix, p.DestinationAddressPrefixes), join(p.DestinationPortRange, p.DestinationPortRanges)}
}

func rulesByName(g *armnetwork.SecurityGroup) map[string]ruleView {
	out := map[string]ruleView{}
	for _, r := range g.Properties.SecurityRules {
		out[*r.Name] = view(r)
	}
	return out
}

var (
	tcpS = armnetwork.SecurityRuleProtocolTCP
	udpS = armnetwork.SecurityRuleProtocolUDP
	anyS = armnetwork.SecurityRuleProtocolAsterisk
	allw = armnetwork.SecurityRuleAccessAllow
	deny = armnetwork.SecurityRuleAccessDeny
)

func TestApplySecurityPatch(t *testing.T) {
	tests := []struct {
		name  string
		opts  []svcOpt
		start []*armnetwork.SecurityRule
		dsts  []netip.Addr
		want  map[string]ruleView
	}{
		{
			name: "public service open to the Internet",
			opts: []svcOpt{withPorts(tcp(80, 30080), tcp(443, 30443))},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{ruleTCP80and443: {500, tcpS, allw, "Internet", "203.0.113.5", "443,80"}},
		},
		{
			name:  "priority skips used slots, user rules untouched",
			start: []*armnetwork.SecurityRule{userRule("user-ssh", 500), userRule("k8s-azure-lb_foreign_low", 100)},
			dsts:  addrs("203.0.113.5"),
			want: map[string]ruleView{
				"user-ssh":                 {500, tcpS, allw, "*", "203.0.113.1", "22"},
				"k8s-azure-lb_foreign_low": {100, tcpS, allw, "*", "203.0.113.1", "22"},
				ruleTCP80Internet:          {501, tcpS, allw, "Internet", "203.0.113.5", "80"},
			},
		},
		{
			name: "source ranges with deny-all",
			opts: []svcOpt{func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"192.168.1.0/24", "10.0.0.0/8"} },
				withAnn(annotations.DenyAllExceptLBSources, "true")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{
				ruleTCP80Ranges:              {500, tcpS, allw, "10.0.0.0/8,192.168.1.0/24", "203.0.113.5", "80"},
				"k8s-azure-lb_deny-all_IPv4": {4095, anyS, deny, "*", "203.0.113.5", "*"},
			},
		},
		{
			name: "a malformed range is dropped: the rest allowed, no Internet rule, deny-all",
			opts: []svcOpt{withAnn(annotations.AllowedIPRanges, "10.0.0.0/8,192.168.1.0/24,10.0.0.0/x")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{
				ruleTCP80Ranges:              {500, tcpS, allw, "10.0.0.0/8,192.168.1.0/24", "203.0.113.5", "80"},
				"k8s-azure-lb_deny-all_IPv4": {4095, anyS, deny, "*", "203.0.113.5", "*"},
			},
		},
		{
			name: "every range malformed: only the deny-all rule, never the Internet",
			opts: []svcOpt{withAnn(annotations.CoreLBSourceRanges, "bogus")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{"k8s-azure-lb_deny-all_IPv4": {4095, anyS, deny, "*", "203.0.113.5", "*"}},
		},
		{
			name: "overlapping and repeated source ranges are aggregated",
			opts: []svcOpt{func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = sixRanges }},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{ruleTCP80Aggregated: {500, tcpS, allw, "10.20.0.0/16,192.168.0.1/32", "203.0.113.5", "80"}},
		},
		{
			name: "allowed IP ranges are aggregated per family",
			opts: []svcOpt{dualStack, withAnn(annotations.AllowedIPRanges, "2001:db9::/48,2001:db8:1::/48,10.20.8.0/24,2001:db8::/32,10.20.0.0/16,10.20.8.0/24")},
			dsts: addrs("203.0.113.5", "2001:db8::5"),
			want: map[string]ruleView{
				ruleTCP80Range16: {500, tcpS, allw, "10.20.0.0/16", "203.0.113.5", "80"},
				ruleTCP80IPv6Two: {501, tcpS, allw, "2001:db8::/32,2001:db9::/48", "2001:db8::5", "80"},
			},
		},
		{
			name: "a repeated service tag is one rule with one source",
			opts: []svcOpt{withAnn(annotations.AllowedServiceTags, "AzureCloud,AzureCloud")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{ruleTCP80AzureCloud: {500, tcpS, allw, "AzureCloud", "203.0.113.5", "80"}},
		},
		{
			name: "a repeated destination (an additional public IP that is the frontend's) is written once",
			dsts: addrs("203.0.113.9", "203.0.113.5", "203.0.113.5"),
			want: map[string]ruleView{ruleTCP80Internet: {500, tcpS, allw, "Internet", "203.0.113.5,203.0.113.9", "80"}},
		},
		{
			name:  "the rule of the six ranges written unaggregated gives way to the aggregated one",
			opts:  []svcOpt{func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = sixRanges }},
			start: []*armnetwork.SecurityRule{allowRule(ruleTCP80SixRanges, 500, []string{"10.20.0.0/16", "10.20.8.0/24", "10.20.8.1/32", "10.20.9.0/25", "192.168.0.1/32", "192.168.0.1/32"}, []string{"203.0.113.5"})},
			dsts:  addrs("203.0.113.5"),
			want:  map[string]ruleView{ruleTCP80Aggregated: {501, tcpS, allw, "10.20.0.0/16,192.168.0.1/32", "203.0.113.5", "80"}},
		},
		{
			name: "deny-all needs ranges",
			opts: []svcOpt{withAnn(annotations.DenyAllExceptLBSources, "true")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{ruleTCP80Internet: {500, tcpS, allw, "Internet", "203.0.113.5", "80"}},
		},
		{
			name: "service tags get one rule each",
			opts: []svcOpt{withAnn(annotations.AllowedServiceTags, "AzureCloud,Storage")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{
				ruleTCP80AzureCloud: {500, tcpS, allw, "AzureCloud", "203.0.113.5", "80"},
				ruleTCP80Storage:    {501, tcpS, allw, "Storage", "203.0.113.5", "80"},
			},
		},
		{
			name: "internal service without ranges gets no rule",
			opts: []svcOpt{withAnn(annotations.Internal, "true")},
			dsts: addrs("10.0.0.7"),
			want: map[string]ruleView{},
		},
		{
			name: "internal service with an allow-all range is open to the Internet",
			opts: []svcOpt{withAnn(annotations.Internal, "true"), withAnn(annotations.AllowedIPRanges, "0.0.0.0/0")},
			dsts: addrs("10.0.0.7"),
			want: map[string]ruleView{
				ruleTCP80Internet: {500, tcpS, allw, "Internet", "10.0.0.7", "80"},
				ruleTCP80AllowAll: {501, tcpS, allw, "0.0.0.0/0", "10.0.0.7", "80"},
			},
		},
		{
			name: "floating IP disabled: node addresses and node ports",
			opts: []svcOpt{withAnn(annotations.DisableFloatingIP, "true")},
			dsts: addrs("10.0.0.5", "10.0.0.4"),
			want: map[string]ruleView{ruleTCPNodePort: {500, tcpS, allw, "Internet", "10.0.0.4,10.0.0.5", "30080"}},
		},
		{
			name: "UDP and SCTP",
			opts: []svcOpt{withPorts(udp(53, 30053), v1.ServicePort{Port: 9, NodePort: 30009, Protocol: v1.ProtocolSCTP})},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{
				ruleUDP53Internet: {500, udpS, allw, "Internet", "203.0.113.5", "53"},
				ruleSCTP9Internet: {501, anyS, allw, "Internet", "203.0.113.5", "9"},
			},
		},
		{
			name: "dual-stack with ranges per family",
			opts: []svcOpt{dualStack, withAnn(annotations.AllowedIPRanges, "2001:db8::/32")},
			dsts: addrs("203.0.113.5", "2001:db8::5"),
			want: map[string]ruleView{ruleTCP80IPv6Range: {500, tcpS, allw, "2001:db8::/32", "2001:db8::5", "80"}},
		},
		{
			name: "dual-stack open",
			opts: []svcOpt{dualStack},
			dsts: addrs("203.0.113.5", "2001:db8::5"),
			want: map[string]ruleView{
				ruleTCP80Internet: {500, tcpS, allw, "Internet", "203.0.113.5", "80"},
				ruleTCP80IPv6:     {501, tcpS, allw, "Internet", "2001:db8::5", "80"},
			},
		},
		{
			name: "NSG rule disabled: nothing added",
			opts: []svcOpt{withAnn(annotations.DisableNSGRule, "true")},
			dsts: addrs("203.0.113.5"),
			want: map[string]ruleView{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mkService(t, uidA, "a", tc.opts...)
			g, err := ApplySecurity(nsg(tc.start...), SecurityInput{Service: s, Want: true, Destinations: tc.dsts})
			if err != nil {
				t.Fatal(err)
			}
			got := rulesByName(g)
			if len(got) != len(tc.want) {
				t.Fatalf("rules %v, want %v", got, tc.want)
			}
			for name, w := range tc.want {
				if got[name] != w {
					t.Errorf("rule %s: got %+v want %+v", name, got[name], w)
				}
			}
			before := mustJSON(t, g)
			again, err := ApplySecurity(clone(t, g), SecurityInput{Service: s, Want: true, Destinations: tc.dsts})
			if err != nil || mustJSON(t, again) != before {
				t.Fatalf("not idempotent (%v):\n%s\n%s", err, before, mustJSON(t, again))
			}
		})
	}
}

// allowRule is a provider allow rule on TCP port 80 as read from Azure, with the address lists
// in the plural fields in the given order.
func allowRule(name string, prio int32, srcs, dsts []string) *armnetwork.SecurityRule {
	return &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: &armnetwork.SecurityRulePropertiesFormat{
		Priority: to.Ptr(prio), Protocol: to.Ptr(tcpS), Access: to.Ptr(allw), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound),
		SourceAddressPrefixes: to.SliceOfPtrs(srcs...), SourcePortRange: to.Ptr("*"),
		DestinationAddressPrefixes: to.SliceOfPtrs(dsts...), DestinationPortRanges: to.SliceOfPtrs("80")}}
}

// A rule that already lists the wanted sources and destinations, in another order, is left as
// it is (no PUT for the order alone); one whose lists change is written sorted.
func TestApplySecurityKeepsTheOrderOfUnchangedLists(t *testing.T) {
	ranges := withAnn(annotations.AllowedIPRanges, "10.0.0.0/8,192.168.1.0/24")
	a := mkService(t, uidA, "a", ranges)
	start := nsg(allowRule(ruleTCP80Ranges, 500, []string{"192.168.1.0/24", "10.0.0.0/8"}, []string{"203.0.113.6", "203.0.113.5"}))
	want := mustJSON(t, start)
	g, err := ApplySecurity(clone(t, start), SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.5")})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, g); got != want {
		t.Fatalf("an unchanged rule was rewritten:\n%s\nwant\n%s", got, want)
	}
	// One value in the plural field stays there too.
	single := nsg(allowRule(ruleTCP80Ranges, 500, []string{"192.168.1.0/24", "10.0.0.0/8"}, []string{"203.0.113.5"}))
	want = mustJSON(t, single)
	if g, err = ApplySecurity(clone(t, single), SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.5")}); err != nil || mustJSON(t, g) != want {
		t.Fatalf("a single destination was moved (%v):\n%s\nwant\n%s", err, mustJSON(t, g), want)
	}
	// A new destination: the list is written sorted; the sources, unchanged, keep their order.
	b := mkService(t, uidB, "b", ranges)
	g, err = ApplySecurity(clone(t, start), SecurityInput{Service: b, Want: true, Destinations: addrs("203.0.113.1")})
	if err != nil {
		t.Fatal(err)
	}
	if got := rulesByName(g)[ruleTCP80Ranges]; got != (ruleView{500, tcpS, allw, "192.168.1.0/24,10.0.0.0/8", "203.0.113.1,203.0.113.5,203.0.113.6", "80"}) {
		t.Fatalf("%+v", got)
	}
	// A list repeating a value is rewritten without the repeat.
	dup := nsg(allowRule(ruleTCP80Ranges, 500, []string{"10.0.0.0/8", "192.168.1.0/24"}, []string{"203.0.113.5", "203.0.113.5"}))
	if g, err = ApplySecurity(dup, SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.5")}); err != nil {
		t.Fatal(err)
	}
	if got := rulesByName(g)[ruleTCP80Ranges]; got.dests != "203.0.113.5" {
		t.Fatalf("%+v", got)
	}
}

func TestApplySecuritySharedRulesAndCleanup(t *testing.T) {
	a := mkService(t, uidA, "a")
	b := mkService(t, uidB, "b")
	g := nsg(userRule("user", 100))
	g, _ = ApplySecurity(g, SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.1")})
	g, _ = ApplySecurity(g, SecurityInput{Service: b, Want: true, Destinations: addrs("203.0.113.2")})
	if got := rulesByName(g)[ruleTCP80Internet]; got != (ruleView{500, tcpS, allw, "Internet", "203.0.113.1,203.0.113.2", "80"}) {
		t.Fatalf("shared rule %+v", got)
	}
	// A deleted: its address leaves the shared rule.
	g, _ = ApplySecurity(g, SecurityInput{Service: a, Want: false, Destinations: addrs("203.0.113.1")})
	if got := rulesByName(g)[ruleTCP80Internet]; got.dests != "203.0.113.2" {
		t.Fatalf("after A: %+v", got)
	}
	// B deleted: the rule is gone, the user rule stays.
	g, _ = ApplySecurity(g, SecurityInput{Service: b, Want: false, Destinations: addrs("203.0.113.2")})
	if got := ManagedRuleNames(g); len(got) != 0 || len(g.Properties.SecurityRules) != 1 {
		t.Fatalf("left: %v", rulesByName(g))
	}
}

func TestApplySecurityRetainsPortsOfServicesSharingTheIP(t *testing.T) {
	// A serves 80 and 443 on 203.0.113.1; B shares the address and serves 80.
	a := mkService(t, uidA, "a", withPorts(tcp(80, 30080), tcp(443, 30443)))
	g, _ := ApplySecurity(nsg(), SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.1")})
	retain := map[armnetwork.SecurityRuleProtocol][]int32{tcpS: {80}}
	g, err := ApplySecurity(g, SecurityInput{Service: a, Want: false, Destinations: addrs("203.0.113.1"), RetainPorts: retain})
	if err != nil {
		t.Fatal(err)
	}
	got := rulesByName(g)
	if len(got) != 1 || got[ruleTCP80Internet] != (ruleView{501, tcpS, allw, "Internet", "203.0.113.1", "80"}) {
		t.Fatalf("want only port 80 kept for B: %+v", got)
	}
	// Deny-all: removed only when nothing on the address is retained.
	c := mkService(t, uidA, "a", withAnn(annotations.AllowedIPRanges, "10.0.0.0/8"), withAnn(annotations.DenyAllExceptLBSources, "true"))
	g, _ = ApplySecurity(nsg(), SecurityInput{Service: c, Want: true, Destinations: addrs("203.0.113.9")})
	g, _ = ApplySecurity(g, SecurityInput{Service: c, Want: false, Destinations: addrs("203.0.113.9")})
	if n := ManagedRuleNames(g); len(n) != 0 {
		t.Fatalf("deny rule left: %v", n)
	}
}

func TestApplySecurityStaleDestinations(t *testing.T) {
	a := mkService(t, uidA, "a")
	g, _ := ApplySecurity(nsg(), SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.1")})
	// The service got a new IP: the old one is removed, the new one added to the same rule.
	g, _ = ApplySecurity(g, SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.7"), Stale: addrs("203.0.113.1")})
	if got := rulesByName(g)[ruleTCP80Internet]; got.dests != "203.0.113.7" {
		t.Fatalf("%+v", got)
	}
	// Ports changed 80 → 443: the old rule loses the address and disappears.
	a443 := mkService(t, uidA, "a", withPorts(tcp(443, 30443)))
	g, _ = ApplySecurity(g, SecurityInput{Service: a443, Want: true, Destinations: addrs("203.0.113.7")})
	if n := ManagedRuleNames(g); len(n) != 1 || n[0] != ruleTCP443Internet {
		t.Fatalf("%v", n)
	}
}

func TestApplySecurityErrors(t *testing.T) {
	a := mkService(t, uidA, "a")
	if _, err := ApplySecurity(nil, SecurityInput{Service: a, Want: true}); err == nil {
		t.Fatal("missing NSG must be an error")
	}
	// Exhausted priorities.
	var rules []*armnetwork.SecurityRule
	for p := int32(500); p < 4096; p++ {
		rules = append(rules, userRule("u"+itoa(p), p))
	}
	g := nsg(rules...)
	if _, err := ApplySecurity(g, SecurityInput{Service: a, Want: true, Destinations: addrs("203.0.113.1")}); err == nil {
		t.Fatal("want priority or limit error")
	}
}

func TestDestinationPorts(t *testing.T) {
	s := mkService(t, uidA, "a", withPorts(tcp(80, 30080), udp(80, 30081), tcp(80, 30080)))
	got, err := DestinationPorts(s)
	if err != nil || len(got[tcpS]) != 1 || len(got[udpS]) != 1 {
		t.Fatalf("%v %v", got, err)
	}
}
