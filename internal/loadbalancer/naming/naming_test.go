package naming

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const uid = "12345678-90ab-cdef-1234-567890abcdef"

// lbName is "a" + the dash-less UID cut to 32 characters: the last hex character is dropped.
const lbName = "a1234567890abcdef1234567890abcde"

func TestServiceLBName(t *testing.T) {
	if got := ServiceLBName(uid); got != lbName {
		t.Fatalf("got %q", got)
	}
	if got := ServiceLBName("abc-def"); got != "aabcdef" {
		t.Fatalf("short uid: %q", got)
	}
}

func TestLoadBalancerName(t *testing.T) {
	if LoadBalancerName("kubernetes", false) != "kubernetes" || LoadBalancerName("kubernetes", true) != "kubernetes-internal" {
		t.Fatal("lb names")
	}
}

func TestFrontendName(t *testing.T) {
	long := strings.Repeat("s", 60)
	tests := []struct {
		name, subnet string
		dual         bool
		f            Family
		want         string
	}{
		{"ipv4", "", false, IPv4, lbName},
		{"single-stack ipv6 has no suffix", "", false, IPv6, lbName},
		{"dual-stack ipv4", "", true, IPv4, lbName},
		{"dual-stack ipv6", "", true, IPv6, lbName + "-IPv6"},
		{"subnet", "sub1", false, IPv4, lbName + "-sub1"},
		{"subnet dual ipv6", "sub1", true, IPv6, lbName + "-sub1-IPv6"},
		{"long subnet cut to 75", long, false, IPv4, (lbName + "-" + long)[:75]},
		{"cut ending in dash becomes underscore", strings.Repeat("s", 41) + "-x", false, IPv4, lbName + "-" + strings.Repeat("s", 41) + "_"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FrontendName(lbName, tc.subnet, tc.dual, tc.f)
			if got != tc.want {
				t.Fatalf("got %q want %q", got, tc.want)
			}
			if len(got) > 80 {
				t.Fatalf("too long: %d", len(got))
			}
		})
	}
}

func TestRuleName(t *testing.T) {
	long := strings.Repeat("n", 70)
	tests := []struct {
		name, subnet string
		proto        v1.Protocol
		port         int32
		dual         bool
		f            Family
		want         string
	}{
		{"tcp", "", v1.ProtocolTCP, 80, false, IPv4, lbName + "-TCP-80"},
		{"udp", "", v1.ProtocolUDP, 53, false, IPv4, lbName + "-UDP-53"},
		{"sctp", "", v1.ProtocolSCTP, 9, false, IPv4, lbName + "-SCTP-9"},
		{"dual ipv6", "", v1.ProtocolTCP, 443, true, IPv6, lbName + "-TCP-443-IPv6"},
		{"dual ipv4", "", v1.ProtocolTCP, 443, true, IPv4, lbName + "-TCP-443"},
		{"subnet", "sub1", v1.ProtocolTCP, 80, false, IPv4, lbName + "-sub1-TCP-80"},
		// base "a…-TCP-80" is 39 characters, so the subnet segment keeps 75-39-1 = 35.
		{"long subnet", long, v1.ProtocolTCP, 80, false, IPv4, lbName + "-" + long[:35] + "-TCP-80"},
		{"long subnet dual ipv6", long, v1.ProtocolTCP, 80, true, IPv6, lbName + "-" + long[:35] + "-TCP-80-IPv6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RuleName(lbName, tc.subnet, tc.proto, tc.port, tc.dual, tc.f)
			if got != tc.want {
				t.Fatalf("got %q want %q", got, tc.want)
			}
			if len(got) > 80 {
				t.Fatalf("too long: %d", len(got))
			}
		})
	}
}

func TestBackendPoolAndPublicIPNames(t *testing.T) {
	if BackendPoolName("kubernetes", IPv4) != "kubernetes" || BackendPoolName("kubernetes", IPv6) != "kubernetes-IPv6" {
		t.Fatal("pool names")
	}
	prefix := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/pfx1"
	tests := []struct {
		name, cluster, prefix string
		dual                  bool
		f                     Family
		want                  string
	}{
		{"default", "kubernetes", "", false, IPv4, "kubernetes-" + lbName},
		{"single ipv6", "kubernetes", "", false, IPv6, "kubernetes-" + lbName},
		{"dual ipv6", "kubernetes", "", true, IPv6, "kubernetes-" + lbName + "-IPv6"},
		{"prefix", "kubernetes", prefix, false, IPv4, "kubernetes-" + lbName + "-pfx1"},
		{"long cluster cut to 75", strings.Repeat("c", 60), "", true, IPv6, (strings.Repeat("c", 60) + "-" + lbName)[:75] + "-IPv6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PublicIPName(tc.cluster, lbName, tc.prefix, tc.dual, tc.f); got != tc.want {
				t.Fatalf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestFamilies(t *testing.T) {
	s := &v1.Service{}
	if f := Families(s); len(f) != 1 || f[0] != IPv4 || IsDualStack(s) {
		t.Fatal("default family")
	}
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	if f := Families(s); len(f) != 2 || f[0] != IPv6 || !IsDualStack(s) {
		t.Fatal("dual family")
	}
}

func TestServiceTags(t *testing.T) {
	if got := ParseServiceTag(" ns/a, ns/b ,,"); len(got) != 2 || got[0] != "ns/a" || got[1] != "ns/b" {
		t.Fatalf("%v", got)
	}
	if got := FormatServiceTag([]string{"ns/b", "ns/a", "ns/b", ""}); got != "ns/b,ns/a" {
		t.Fatalf("%q", got)
	}
	s := func(v string) *string { return &v }
	if v, ok := ServiceTagValue(map[string]*string{"K8S-Azure-Service": s("ns/a")}); !ok || v != "ns/a" {
		t.Fatal("case-insensitive tag key")
	}
	if v, ok := ServiceTagValue(map[string]*string{"service": s("ns/old")}); !ok || v != "ns/old" {
		t.Fatal("legacy service tag")
	}
	if v, ok := ClusterTagValue(map[string]*string{"kubernetes-cluster-name": s("c1")}); !ok || v != "c1" {
		t.Fatal("legacy cluster tag")
	}
	if v, ok := DNSLabelServiceTagValue(map[string]*string{TagDNSLabelService: s("ns/a")}); !ok || v != "ns/a" {
		t.Fatal("dns tag")
	}
	if _, ok := ServiceTagValue(map[string]*string{"owner": s("me")}); ok {
		t.Fatal("user tag taken as ownership")
	}
}

func TestSecurityRuleNames(t *testing.T) {
	// Expected hashes computed independently: md5("Tcp_Internet_443,80") etc.
	tests := []struct {
		proto   string
		f       Family
		sources []string
		ports   []int32
		want    string
	}{
		{"Tcp", IPv4, []string{"Internet"}, []int32{80, 443}, "k8s-azure-lb_allow_IPv4_556f7044ec033071ec0dfcf7cd85bc93"},
		{"Udp", IPv6, []string{"192.168.0.0/16", "10.0.0.0/8"}, []int32{53}, "k8s-azure-lb_allow_IPv6_545ea50c50ef8635dcabbb5c0e93cbed"},
		{"*", IPv4, []string{"Internet"}, []int32{5000}, "k8s-azure-lb_allow_IPv4_9041453ad5c95ba2f399da5edec62bb3"},
	}
	for _, tc := range tests {
		src := append([]string(nil), tc.sources...)
		if got := AllowRuleName(tc.proto, tc.f, tc.sources, tc.ports); got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
		for i := range src {
			if src[i] != tc.sources[i] {
				t.Fatal("AllowRuleName sorted the caller's slice")
			}
		}
	}
	if DenyAllRuleName(IPv6) != "k8s-azure-lb_deny-all_IPv6" {
		t.Fatal(DenyAllRuleName(IPv6))
	}
	if !IsManagedSecurityRule("k8s-azure-lb_allow_IPv4_x", 500) || IsManagedSecurityRule("k8s-azure-lb_allow_IPv4_x", 499) ||
		IsManagedSecurityRule("user-rule", 600) || !IsManagedSecurityRule(DenyAllRuleName(IPv4), 4095) {
		t.Fatal("managed rule test")
	}
}

func TestOwnedByService(t *testing.T) {
	if !OwnedByService(lbName, lbName+"-TCP-80") || !OwnedByService(lbName, strings.ToUpper(lbName)) || OwnedByService(lbName, "other-TCP-80") {
		t.Fatal("ownership")
	}
}

// TestLiteralNames pins, as literals, the names and tag keys the tests above only use through
// their constants or do not reach.
func TestLiteralNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{LocalServicePoolName("Team-A", "Web", IPv4), "team-a-web"},
		{LocalServicePoolName("Team-A", "Web", IPv6), "team-a-web-ipv6"},
		{MigrationPoolName("kubernetes"), "kubernetes_ip-migration"},
		{ServiceKey("default", "web"), "default/web"},
		{SharedProbeName, "cluster-service-shared-health-probe"},
		{TagService, "k8s-azure-service"},
		{TagClusterName, "k8s-azure-cluster-name"},
		{TagDNSLabelService, "k8s-azure-dns-label-service"},
		{LegacyTagService, "service"},
		{LegacyTagClusterName, "kubernetes-cluster-name"},
		{LegacyTagDNSLabelService, "kubernetes-dns-label-service"},
		{DenyAllRuleName(IPv4), "k8s-azure-lb_deny-all_IPv4"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
